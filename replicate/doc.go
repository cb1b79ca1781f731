// Package replicate is towerflow's engine: it runs one model function
// (model.Fn) as one tower per device, as TensorFlow's replicate_model_fn
// did, and gives the same numbers as one device.
//
// ModelFn pairs a model function with a Config (devices, loss reduction,
// placement, optimizer, gradient reduction); NewEngine makes the variable
// store and runs steps: TrainStep, EvalStep (then Metrics) and PredictStep.
// Package estimator drives an Engine in its run loop; this package knows
// how towers are built and combined, and nothing of hooks, checkpoints or
// input functions.
//
// Each rule is one function, named after its counterpart in
// replicate_model_fn.py where there is one:
//
//	rule                                              function (file)
//	split the batch along dim 0 for a mode            Engine.splitBatch (split.go), sharding.Batch.Split
//	  (sizes differ by at most one; fewer rows
//	  than devices run on fewer towers; no labels
//	  in Predict)
//	remember how a batch was split                    splitCache (split.go)
//	build the towers of a mode and input signature,   Engine.prepare, Engine.buildTowers (build.go)
//	  cached (at most 64 builds, least recently
//	  used evicted)
//	variables: one master per name; tower 0           towers.Scope.Variable
//	  creates, tower i>0 reuses and prefixes
//	  its nodes "tower_i/"
//	placement: CPU:0, a local parameter server;       parameterServer (config.go), towers.StoreConfig
//	  Config.Placement counts model variables only
//	towers must build the same model                  sameModel, checkSpec (build.go)
//	loss weights per reduction (_get_loss_towers)     lossWeights (loss.go)
//	reduced loss                                      build.loss (loss.go)
//	gradients per variable and tower                  Engine.minimizeTowers (train.go)
//	  (_minimize_towers); none: skipped
//	sum gradients over towers, weighted               sumTowerGradients, sumGradients (train.go, sum.go)
//	  (_compute_sum_on_device)
//	reduce-gradients seam (cross-process)             Engine.reduceGradients (train.go)
//	clip by global norm and by value (model.Clip),     Engine.clipTrainOps, ClipGradients, GlobalNorm,
//	  once per update, after the sum and the            Engine.GradientNorm (clip.go)
//	  all-reduce; sparse gradients deduplicated
//	  first; the norm before clipping kept
//	accumulate K micro-batches into one update,        Engine.TrainMicroBatches, accumulateGradients,
//	  weighted as one step on them together             accumulateUpdates, lossWeightsOf
//	  (Config.AccumulateSteps)                          (accumulate.go, loss.go)
//	apply each train op once, step + 1 (_train_spec)  Engine.applyTrainOps, Engine.TrainStep (train.go)
//	a train step is compute then apply; gradients     Engine.computeStep, Engine.applyStep (train.go);
//	  as values: computed without applying them,       Engine.ComputeGradients, Engine.ApplyGradients
//	  applied from outside (state updates pending)      (gradients.go)
//	each tower updates its metric states              Engine.EvalStep (eval.go)
//	  (_eval_spec)
//	state updates (UPDATE_OPS): the same on every     Engine.planUpdates (updates.go)
//	  tower; G.Set of a variable is an Assign         tower.Tower.AssignSets
//	combine state updates over the towers, apply     combineUpdates, writeUpdates (updates.go)
//	  them once after the optimizers: deltas
//	  summed, assigned values averaged with the
//	  batch weights
//	rendezvous of a step's towers (synchronized       towers.Scope.Group; reset and
//	  batch norm): loss weights handed in, reset        aborted in tower.RunAll;
//	  before, aborted when a tower fails                weights set in TrainStep
//	reduce metric states into tower 0, zero the       Engine.Metrics (eval.go)
//	  replicas (_reduce_metric_variables)
//	predictions and export outputs concatenated       Engine.PredictStep, concatTowers (predict.go)
//	  in tower order (_predict_spec,
//	  _concat_tensor_dicts)
//
// Across processes (Config.Processes, a collective.Comm):
//
//	a status header before every collective phase:    across.exchange, Engine.Open, Engine.Leave,
//	  a failed or stopped rank stops every rank         PeerError (across.go)
//	a phase of collectives waits at most              across.bound, across.broke (across.go)
//	  Config.PeerTimeout, then every live rank
//	  stops with a PeerError
//	process weights: rows, towers or 1 per reduction  processScale, globalLoss (across.go)
//	gradients and state updates of every process      arena, layOut, across.reduce (arena.go)
//	  summed in one all-reduce, in place, bucketed
//	sparse gradients (embedding tables) summed over   Engine.reduceSparseAcross (sparse.go),
//	  the processes after the dense all-reduce:         across.reduceSparse (sparse_across.go)
//	  ids and rows all-gathered, or densified and
//	  all-reduced (Config.SparseAsDense, by
//	  density); an empty gradient takes part;
//	  deduplicated before clipping and the update
//	every rank takes rank 0's variables               Engine.SyncFromRoot (sync.go)
//	every rank builds what rank 0 builds: a hash of   Engine.describe, across.sameBuild,
//	  each build in the headers, the first              ModelMismatchError (ranks.go)
//	  difference named on every rank
//	weight averaging every K steps (tables whole)     Engine.average (sync.go)
//	accumulated micro-batches: one header and one     Engine.computeMicroBatches (accumulate.go)
//	  all-reduce per update, after the last
//	metric states summed over the processes           Engine.ReduceMetrics (sync.go)
//
// The semantics, in short:
//
//   - Devices default to towers.LocalDevices(): one CPU device per core.
//     A GPU device is an error (towerflow has no GPU backend); more CPU
//     towers than cores run (and are logged).
//   - Loss reduction: BatchMean (the default) weights each tower by its
//     share of the batch's rows, so N towers train exactly like one device
//     on any machine; Sum (replicate_model_fn's default) and Mean
//     (each tower over the number of towers) are there for TensorFlow
//     parity; None is an error. Gradients are weighted like the losses.
//   - The optimizer runs once per step on the masters; other Spec fields
//     come from tower 0.
//   - Across processes the loss weights span every tower of every process:
//     N processes × M towers train like one device on the combined batch.
//   - Clipping (model.TrainOp.Clip, Config.Clip) runs on the gradients
//     summed over every tower and process, once per update, so it clips as
//     one device does (PyTorch's order; TensorFlow 1 clipped per tower).
//   - K accumulated micro-batches (TrainMicroBatches, Config.AccumulateSteps)
//     are one update weighted as K times the towers would be: one step on
//     the K batches together; the global step counts updates.
//   - Towers whose model functions build different variables, metrics,
//     train ops or outputs are an error naming the tower; a panic in a
//     model function is an error naming the tower and mode.
package replicate
