//go:build dnnl

#include "conv.h"

#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One engine serves every convolution; oneDNN primitives may run on many
// threads at once when, as here, each run brings its own scratchpad.
static dnnl_engine_t engine;

// arg is one argument of a pass: its plain layout, the layout the
// primitive wants, and the reorder between them (plain to inner for an
// input, inner to plain for the output; NULL where they agree). The
// kernel gradient's output also has accumulate, which adds the inner
// layout into the plain one: the chunks' gradients add up.
//
// An input whose inner layout differs from the plain one in both layout
// and data type (float32 NCHW into bfloat16 nChw16c) goes through mid,
// the inner layout in the plain data type: reorder changes the layout
// (plain to mid) and convert the data type (mid to inner). oneDNN's
// direct reorder between the two runs in its generic implementation
// (jit:uni), about half as fast as the blocked reorder followed by the
// conversion; the values are the same, since moving floats is exact and
// the conversion is elementwise.
//
// Where the conversion to bfloat16 is of a dense buffer (the layouts
// differ in data type alone and have no padding: NHWC images from plain
// to inner, blocked layouts whose dimensions fill their blocks from mid to
// inner), tf_f32_to_bf16 does it (cvt: the elements) instead of oneDNN's
// reorder, which runs in its generic implementation: NHWC images then need
// no reorder at all.
typedef struct {
	int which;   // DNNL_ARG_*
	int batch;   // 1: per image, taken a chunk at a time; 0: the kernel
	dnnl_memory_desc_t plain, inner, mid;
	dnnl_primitive_t reorder, accumulate, convert;
	long cvt;       // elements tf_f32_to_bf16 converts into inner; 0: none
	size_t off;     // of inner in the workspace
	size_t mid_off; // of mid in the workspace, where convert or cvt is set
} arg;

// staged says the primitive reads or writes a in the workspace (inner)
// rather than in the caller's array.
static int staged(const arg *a) { return a->reorder || a->cvt; }

// has_mid says input a is reordered into mid before its conversion.
static int has_mid(const arg *a) { return a->convert || (a->cvt && a->reorder); }

// pass is one pass of a convolution of a chunk of images.
typedef struct {
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t prim;
	arg a[3]; // in0, in1, out
	dnnl_memory_desc_t scratch;
	size_t scratch_off, size;
} pass;

// A convolution runs its batch in chunks of g.chunk images (sub[0]) and
// a last, smaller chunk of the rest (sub[1], when there is a rest).
struct tf_conv {
	tf_geom g;
	dnnl_memory_desc_t bias;
	long per[2];   // elements per image of the input and the output
	pass sub[2][TF_PASSES];
	int subs;
};

#define TRY(what, f) do { dnnl_status_t s_ = (f); if (s_ != dnnl_success) { *step = what; return s_; } } while (0)

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

// The threads oneDNN uses are the calling thread alone: towerflow runs one
// tower per core, and a team of threads under every tower would
// oversubscribe the cores (as OpenBLAS, which towers holds to one thread).
// The count is a property of the calling OS thread, so every entry sets it.
static void one_thread(void) { omp_set_num_threads(1); }

// attr returns attributes with a user scratchpad, and with an added sum
// post-op when sum is set.
static dnnl_status_t attr(dnnl_primitive_attr_t *a, int sum) {
	dnnl_status_t s = dnnl_primitive_attr_create(a);
	if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(*a, dnnl_scratchpad_mode_user);
	if (s != dnnl_success || !sum) return s;
	dnnl_post_ops_t ops;
	if ((s = dnnl_post_ops_create(&ops)) != dnnl_success) return s;
	if ((s = dnnl_post_ops_append_sum(ops, 1.0f)) == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*a, ops);
	dnnl_post_ops_destroy(ops);
	return s;
}

static size_t scratch_size(dnnl_primitive_desc_t pd) {
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	return md ? dnnl_memory_desc_get_size(md) : 0;
}

// reorder_pd makes the reorder from one layout to another, adding to what
// is there when sum is set; it grows *scratch to the reorder's scratchpad.
static int reorder_pd(dnnl_primitive_t *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int sum, size_t *scratch, const char **step) {
	dnnl_primitive_attr_t a;
	TRY("reorder attributes", attr(&a, sum));
	dnnl_primitive_desc_t pd;
	dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, a);
	dnnl_primitive_attr_destroy(a);
	TRY("reorder", s);
	size_t n = scratch_size(pd);
	if (n > *scratch) *scratch = n;
	s = dnnl_primitive_create(r, pd);
	dnnl_primitive_desc_destroy(pd);
	TRY("reorder primitive", s);
	return dnnl_success;
}

// dense_bf16 returns the elements of from, a float32 layout, when to is
// the same layout in bfloat16 and both are dense (every byte an element:
// no padding), so that converting from's buffer element by element gives
// to's; 0 otherwise.
static long dense_bf16(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
	if (from->data_type != dnnl_f32 || to->data_type != dnnl_bf16 || from->offset0 || to->offset0) return 0;
	dnnl_memory_desc_t same = *from;
	same.data_type = dnnl_bf16;
	if (from->format_kind != dnnl_blocked || !dnnl_memory_desc_equal(&same, to)) return 0;
	long n = 1;
	for (int i = 0; i < from->ndims; i++) {
		if (from->padded_dims[i] != from->dims[i]) return 0;
		n *= from->dims[i];
	}
	if (n <= 0 || dnnl_memory_desc_get_size(from) != 4 * (size_t)n || dnnl_memory_desc_get_size(to) != 2 * (size_t)n) return 0;
	return n;
}

// round_bf16 is f rounded to bfloat16 as bf16.FromFloat32 rounds it: a NaN
// keeps its sign and high payload, made quiet; adding 0x7fff and the kept
// half's low bit rounds the rest to nearest, ties to even.
static inline uint16_t round_bf16(const float *f) {
	uint32_t u;
	memcpy(&u, f, 4);
	if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)(u >> 16 | 0x0040);
	return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

static void f32_to_bf16_scalar(uint16_t *dst, const float *src, long n) {
	for (long i = 0; i < n; i++) dst[i] = round_bf16(src + i);
}

// round16 is round_bf16 of 16 floats, each bfloat16 in the upper half of
// its 32 bits.
__attribute__((target("avx512f,avx512bw")))
static inline __m512i round16(__m512i u) {
	const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), abs = _mm512_set1_epi32(0x7fffffff),
		inf = _mm512_set1_epi32(0x7f800000), quiet = _mm512_set1_epi32(0x00400000);
	__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
	return _mm512_mask_or_epi32(r, nan, u, quiet);
}

// f32_to_bf16_avx512 is round_bf16 32 floats at a time (the upper halves
// of two vectors' 32-bit lanes gathered in one permute), then 16.
__attribute__((target("avx512f,avx512bw")))
static void f32_to_bf16_avx512(uint16_t *dst, const float *src, long n) {
	const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,
		31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	long i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512i r0 = round16(_mm512_loadu_si512(src + i)), r1 = round16(_mm512_loadu_si512(src + i + 16));
		_mm512_storeu_si512(dst + i, _mm512_permutex2var_epi16(r0, odd, r1));
	}
	for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(round16(_mm512_loadu_si512(src + i)), 16)));
	f32_to_bf16_scalar(dst + i, src + i, n - i);
}

void tf_f32_to_bf16(uint16_t *dst, const float *src, long n) {
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) f32_to_bf16_avx512(dst, src, n);
	else f32_to_bf16_scalar(dst, src, n);
}

// set_arg fills a from the primitive's layout for argument which; out says
// a is the output. It grows the pass's workspace and scratchpad.
static int set_arg(pass *p, arg *a, int which, int batch, dnnl_query_t q, const dnnl_memory_desc_t *plain, int out, int one_step, size_t *scratch, const char **step) {
	a->which = which;
	a->batch = batch;
	a->plain = *plain;
	a->inner = *dnnl_primitive_desc_query_md(p->pd, q, 0);
	// The kernel's gradient always goes through the workspace: the chunks'
	// gradients are added up on the way out.
	int acc = out && !batch;
	if (!acc && dnnl_memory_desc_equal(&a->plain, &a->inner)) return dnnl_success;
	a->off = p->size;
	p->size += align64(dnnl_memory_desc_get_size(&a->inner));
	int r;
	if (!out && !one_step && a->plain.data_type != a->inner.data_type) {
		a->mid = a->inner;
		a->mid.data_type = a->plain.data_type;
		if ((a->cvt = dense_bf16(&a->plain, &a->inner))) return dnnl_success;
		if (!dnnl_memory_desc_equal(&a->mid, &a->plain)) {
			a->mid_off = p->size;
			p->size += align64(dnnl_memory_desc_get_size(&a->mid));
			if ((r = reorder_pd(&a->reorder, &a->plain, &a->mid, 0, scratch, step))) return r;
			if ((a->cvt = dense_bf16(&a->mid, &a->inner))) return dnnl_success;
			return reorder_pd(&a->convert, &a->mid, &a->inner, 0, scratch, step);
		}
	}
	if (!out) return reorder_pd(&a->reorder, &a->plain, &a->inner, 0, scratch, step);
	if ((r = reorder_pd(&a->reorder, &a->inner, &a->plain, 0, scratch, step))) return r;
	if (acc) return reorder_pd(&a->accumulate, &a->inner, &a->plain, 1, scratch, step);
	return dnnl_success;
}

// finish creates the pass's primitive and sizes its scratchpad, the
// largest of its own and its reorders'.
static int finish(pass *p, size_t scratch, const char **step) {
	size_t n = scratch_size(p->pd);
	if (n > scratch) scratch = n;
	dnnl_dims_t d = {(dnnl_dim_t)(scratch ? scratch : 1)};
	TRY("scratchpad", dnnl_memory_desc_init_by_tag(&p->scratch, 1, d, dnnl_u8, dnnl_a));
	p->scratch_off = p->size;
	p->size += align64(scratch);
	TRY("primitive", dnnl_primitive_create(&p->prim, p->pd));
	return dnnl_success;
}

// spec is an argument of a pass: which, whether per image, the query of
// the primitive's layout, and the plain layout.
typedef struct {
	int which, batch;
	dnnl_query_t q;
	const dnnl_memory_desc_t *plain;
} spec;

static const char *pd_impl(const_dnnl_primitive_desc_t pd) {
	const char *impl = "";
	dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
	return impl;
}

static int prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

// pick sets *pd to the implementation of desc a pass takes: oneDNN's
// first, but with direct set, where oneDNN's first is its brgemm kernels
// on AVX512_BF16 (brgconv:avx512_core_bf16 or brgconv_1x1:; AMX's are
// named avx512_core_amx_bf16 and stay), its direct bfloat16 kernels
// (jit_bf16) where it has them for desc. The names are oneDNN 2.6's (later
// versions name the brgemm kernels brg_conv_fwd): under another, the rule
// does nothing, and TestBF16ForwardTakesDirectKernels says so.
static dnnl_status_t pick(dnnl_primitive_desc_t *pd, const void *desc, const_dnnl_primitive_attr_t a, const_dnnl_primitive_desc_t hint, int direct) {
	*pd = NULL;
	dnnl_primitive_desc_iterator_t it;
	dnnl_status_t s = dnnl_primitive_desc_iterator_create(&it, desc, a, engine, hint);
	if (s != dnnl_success) return s;
	*pd = dnnl_primitive_desc_iterator_fetch(it);
	const char *first = *pd ? pd_impl(*pd) : "";
	if (direct && prefix(first, "brgconv") && strstr(first, ":avx512_core_bf16")) {
		while (dnnl_primitive_desc_iterator_next(it) == dnnl_success) {
			dnnl_primitive_desc_t next = dnnl_primitive_desc_iterator_fetch(it);
			if (next && prefix(pd_impl(next), "jit_bf16")) {
				dnnl_primitive_desc_destroy(*pd);
				*pd = next;
				break;
			}
			if (next) dnnl_primitive_desc_destroy(next);
		}
	}
	dnnl_primitive_desc_iterator_destroy(it);
	return *pd ? dnnl_success : dnnl_unimplemented;
}

// make_pass makes pass p from its operation descriptor and attributes
// (which it destroys), with the forward pass as hint for a gradient and
// oneDNN's direct kernels where direct is set (pick); the third argument
// is the output.
static int make_pass(pass *p, const void *desc, dnnl_primitive_attr_t a, const_dnnl_primitive_desc_t hint, int direct, const char *what, const spec sp[3], int one_step, const char **step) {
	dnnl_status_t s = pick(&p->pd, desc, a, hint, direct);
	dnnl_primitive_attr_destroy(a);
	TRY(what, s);
	size_t scratch = 0;
	int r;
	for (int i = 0; i < 3; i++) {
		if ((r = set_arg(p, &p->a[i], sp[i].which, sp[i].batch, sp[i].q, sp[i].plain, i == 2, one_step, &scratch, step))) return r;
	}
	return finish(p, scratch, step);
}

// make creates the three passes of the convolution of n images.
static int make(const tf_geom *g, long n, dnnl_memory_desc_t *bias, pass *ps, const char **step) {
	dnnl_dims_t sd = {n, g->c, g->h, g->w}, wd = {g->f, g->c, g->kh, g->kw}, dd = {n, g->f, g->oh, g->ow};
	dnnl_dims_t strides = {g->sh, g->sw}, pad = {g->ph, g->pw};
	dnnl_memory_desc_t src, wei, dst, any_src, any_wei, any_dst, out_src, out_wei, out_dst;
	// The images are NCHW or NHWC. In NHWC the primitive computes on them
	// in that layout too (oneDNN's jit kernels take nhwc, "nspc", as it
	// is), so no reorder runs for them: in float32 the plain and the
	// primitive's layouts are the same, in bfloat16 they differ in data
	// type alone. In NCHW the primitive picks its layout (any: nChw16c on
	// AVX-512) and every run reorders into it and back.
	dnnl_format_tag_t images = g->nhwc ? dnnl_nhwc : dnnl_nchw, inner = g->nhwc ? dnnl_nhwc : dnnl_format_tag_any;
	TRY("input layout", dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, images));
	TRY("kernel layout", dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_oihw));
	TRY("output layout", dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, images));
	// A pass's inputs (any_*) are bfloat16 in a bf16 convolution; its
	// output (out_*) is float32 always.
	dnnl_data_type_t in = g->bf16 ? dnnl_bf16 : dnnl_f32;
	TRY("input layout", dnnl_memory_desc_init_by_tag(&any_src, 4, sd, in, inner));
	TRY("kernel layout", dnnl_memory_desc_init_by_tag(&any_wei, 4, wd, in, dnnl_format_tag_any));
	TRY("output layout", dnnl_memory_desc_init_by_tag(&any_dst, 4, dd, in, inner));
	TRY("input layout", dnnl_memory_desc_init_by_tag(&out_src, 4, sd, dnnl_f32, inner));
	TRY("kernel layout", dnnl_memory_desc_init_by_tag(&out_wei, 4, wd, dnnl_f32, dnnl_format_tag_any));
	TRY("output layout", dnnl_memory_desc_init_by_tag(&out_dst, 4, dd, dnnl_f32, inner));

	dnnl_primitive_attr_t a;
	dnnl_status_t s;
	int r;

	// Forward.
	dnnl_convolution_desc_t fd;
	TRY("forward", dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
		&any_src, &any_wei, g->bias ? bias : NULL, &out_dst, strides, pad, pad));
	TRY("forward attributes", attr(&a, 0));
	if (g->relu) {
		dnnl_post_ops_t ops;
		TRY("ReLU", dnnl_post_ops_create(&ops));
		s = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
		if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(a, ops);
		dnnl_post_ops_destroy(ops);
		if (s != dnnl_success) { dnnl_primitive_attr_destroy(a); *step = "ReLU"; return s; }
	}
	spec fs[3] = {{DNNL_ARG_SRC, 1, dnnl_query_src_md, &src}, {DNNL_ARG_WEIGHTS, 0, dnnl_query_weights_md, &wei}, {DNNL_ARG_DST, 1, dnnl_query_dst_md, &dst}};
	// A bfloat16 forward pass of NHWC images with at most 32 channels in
	// and out takes oneDNN's direct kernels rather than its brgemm ones
	// (pick): on the AMD EPYC (Zen 4) of docs/performance.md, ResNet-20's
	// 16- and 32-channel forward passes took 6-23% less time in them and
	// its 64-channel ones 8% more; a step of two bfloat16 ResNet-20
	// towers, 2% less. In float32, the brgemm kernels are the faster.
	int direct = g->bf16 && g->nhwc && g->c <= 32 && g->f <= 32;
	if ((r = make_pass(&ps[TF_FORWARD], &fd, a, NULL, direct, "forward implementation", fs, g->one_step, step))) return r;

	// The input's gradient.
	dnnl_convolution_desc_t bd;
	TRY("input gradient", dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct,
		&out_src, &any_wei, &any_dst, strides, pad, pad));
	TRY("input gradient attributes", attr(&a, 0));
	spec bs[3] = {{DNNL_ARG_DIFF_DST, 1, dnnl_query_diff_dst_md, &dst}, {DNNL_ARG_WEIGHTS, 0, dnnl_query_weights_md, &wei}, {DNNL_ARG_DIFF_SRC, 1, dnnl_query_diff_src_md, &src}};
	if ((r = make_pass(&ps[TF_INPUT_GRAD], &bd, a, ps[TF_FORWARD].pd, 0, "input gradient implementation", bs, g->one_step, step))) return r;

	// The kernel's gradient.
	dnnl_convolution_desc_t wd_;
	TRY("kernel gradient", dnnl_convolution_backward_weights_desc_init(&wd_, dnnl_convolution_direct,
		&any_src, &out_wei, NULL, &any_dst, strides, pad, pad));
	TRY("kernel gradient attributes", attr(&a, 0));
	spec ws[3] = {{DNNL_ARG_SRC, 1, dnnl_query_src_md, &src}, {DNNL_ARG_DIFF_DST, 1, dnnl_query_diff_dst_md, &dst}, {DNNL_ARG_DIFF_WEIGHTS, 0, dnnl_query_diff_weights_md, &wei}};
	return make_pass(&ps[TF_KERNEL_GRAD], &wd_, a, ps[TF_FORWARD].pd, 0, "kernel gradient implementation", ws, g->one_step, step);
}

int tf_conv_create(const tf_geom *g, tf_conv **out, const char **step) {
	one_thread();
	*out = NULL;
	if (!engine) TRY("engine", dnnl_engine_create(&engine, dnnl_cpu, 0));
	if (g->n <= 0 || g->chunk <= 0) { *step = "batch"; return dnnl_invalid_arguments; }
	tf_conv *c = calloc(1, sizeof *c);
	if (!c) { *step = "memory"; return dnnl_out_of_memory; }
	c->g = *g;
	if (c->g.chunk > g->n) c->g.chunk = g->n;
	c->per[0] = g->c * g->h * g->w;
	c->per[1] = g->f * g->oh * g->ow;
	dnnl_dims_t bd = {g->f};
	int r = dnnl_memory_desc_init_by_tag(&c->bias, 1, bd, dnnl_f32, dnnl_a);
	if (r) *step = "bias layout";
	long rest = g->n % c->g.chunk;
	c->subs = rest ? 2 : 1;
	if (!r) r = make(&c->g, c->g.chunk, &c->bias, c->sub[0], step);
	if (!r && rest) r = make(&c->g, rest, &c->bias, c->sub[1], step);
	if (r) { tf_conv_destroy(c); return r; }
	*out = c;
	return dnnl_success;
}

void tf_conv_destroy(tf_conv *c) {
	if (!c) return;
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < TF_PASSES; i++) {
			pass *p = &c->sub[k][i];
			for (int j = 0; j < 3; j++) {
				if (p->a[j].reorder) dnnl_primitive_destroy(p->a[j].reorder);
				if (p->a[j].accumulate) dnnl_primitive_destroy(p->a[j].accumulate);
				if (p->a[j].convert) dnnl_primitive_destroy(p->a[j].convert);
			}
			if (p->prim) dnnl_primitive_destroy(p->prim);
			if (p->pd) dnnl_primitive_desc_destroy(p->pd);
		}
	}
	free(c);
}

size_t tf_conv_workspace(const tf_conv *c, int p) {
	size_t n = c->sub[0][p].size;
	if (c->subs > 1 && c->sub[1][p].size > n) n = c->sub[1][p].size;
	return n + 64;
}

const char *tf_conv_impl(const tf_conv *c, int p) { return pd_impl(c->sub[0][p].pd); }

static const char *impl_of(dnnl_primitive_t r) {
	const_dnnl_primitive_desc_t pd;
	if (r && dnnl_primitive_get_primitive_desc(r, &pd) == dnnl_success) return pd_impl(pd);
	return "";
}

const char *tf_conv_reorder_impl(const tf_conv *c, int p, int i) { return impl_of(c->sub[0][p].a[i].reorder); }

const char *tf_conv_convert_impl(const tf_conv *c, int p, int i) {
	const arg *a = &c->sub[0][p].a[i];
	if (a->cvt) return TF_CONVERT_IMPL;
	if (a->convert) return impl_of(a->convert);
	if (a->reorder && a->plain.data_type != a->inner.data_type) return impl_of(a->reorder);
	return "";
}

static dnnl_status_t reorder(dnnl_stream_t st, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to, dnnl_memory_t scratch) {
	dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}};
	return dnnl_primitive_execute(r, st, 3, a);
}

// run_sub runs pass p on images [first, first+count) of the batch; kernel
// says the kernel's layouts must be (re)made: the sub's first chunk.
static dnnl_status_t run_sub(const tf_conv *c, const pass *p, int which, dnnl_stream_t st, long first, const void *user[3], const float *bias, char *base, int kernel, const char **step) {
	dnnl_memory_t plain[3] = {0}, inner[3] = {0}, mid[3] = {0}, scratch = NULL, b = NULL;
	const float *u[3];
	dnnl_status_t s;
	// Which of in0, in1, out is the input's images and which the output's.
	long per[3] = {c->per[0], 0, c->per[1]};
	if (which == TF_INPUT_GRAD) { per[0] = c->per[1]; per[2] = c->per[0]; }
	if (which == TF_KERNEL_GRAD) { per[1] = c->per[1]; per[2] = 0; }
	*step = "memory";
	if ((s = dnnl_memory_create(&scratch, &p->scratch, engine, base + p->scratch_off)) != dnnl_success) goto done;
	for (int i = 0; i < 3; i++) {
		const arg *x = &p->a[i];
		u[i] = (const float *)user[i] + first * per[i];
		if ((s = dnnl_memory_create(&plain[i], &x->plain, engine, (void *)u[i])) != dnnl_success) goto done;
		if (staged(x) && (s = dnnl_memory_create(&inner[i], &x->inner, engine, base + x->off)) != dnnl_success) goto done;
		if (has_mid(x) && (s = dnnl_memory_create(&mid[i], &x->mid, engine, base + x->mid_off)) != dnnl_success) goto done;
	}
	*step = "reorder in";
	for (int i = 0; i < 2; i++) {
		const arg *in = &p->a[i];
		if (!staged(in) || !(in->batch || kernel)) continue;
		if (in->reorder && (s = reorder(st, in->reorder, plain[i], has_mid(in) ? mid[i] : inner[i], scratch)) != dnnl_success) goto done;
		if (in->convert && (s = reorder(st, in->convert, mid[i], inner[i], scratch)) != dnnl_success) goto done;
		if (in->cvt) tf_f32_to_bf16((uint16_t *)(base + in->off), in->reorder ? (const float *)(base + in->mid_off) : u[i], in->cvt);
	}
	dnnl_exec_arg_t a[5];
	int n = 0;
	for (int i = 0; i < 3; i++) {
		a[n].arg = p->a[i].which;
		a[n++].memory = staged(&p->a[i]) ? inner[i] : plain[i];
	}
	a[n].arg = DNNL_ARG_SCRATCHPAD;
	a[n++].memory = scratch;
	if (which == TF_FORWARD && c->g.bias) {
		*step = "memory";
		if ((s = dnnl_memory_create(&b, &c->bias, engine, (void *)bias)) != dnnl_success) goto done;
		a[n].arg = DNNL_ARG_BIAS;
		a[n++].memory = b;
	}
	*step = "convolution";
	if ((s = dnnl_primitive_execute(p->prim, st, n, a)) != dnnl_success) goto done;
	*step = "reorder out";
	const arg *o = &p->a[2];
	dnnl_primitive_t r = o->accumulate && first > 0 ? o->accumulate : o->reorder;
	if (r && (s = reorder(st, r, inner[2], plain[2], scratch)) != dnnl_success) goto done;
done:
	for (int i = 0; i < 3; i++) {
		if (plain[i]) dnnl_memory_destroy(plain[i]);
		if (inner[i]) dnnl_memory_destroy(inner[i]);
		if (mid[i]) dnnl_memory_destroy(mid[i]);
	}
	if (scratch) dnnl_memory_destroy(scratch);
	if (b) dnnl_memory_destroy(b);
	return s;
}

// nchunks is how many chunks the batch runs in: full ones and the rest.
static long nchunks(const tf_conv *c) { return (c->g.n + c->g.chunk - 1) / c->g.chunk; }

// run_chunk runs chunk k of pass which; made[sub] says the workspace
// holds the kernel in the layouts of sub (0: a full chunk, 1: the rest),
// which the chunk's run makes where it does not. The two subs lay out the
// same workspace, so a run of one unmakes the other's.
static dnnl_status_t run_chunk(const tf_conv *c, int which, dnnl_stream_t st, long k, const void *user[3], const float *bias, char *base, int made[2], const char **step) {
	long first = k * c->g.chunk;
	int sub = c->g.n - first < c->g.chunk; // the rest
	dnnl_status_t s = run_sub(c, &c->sub[sub][which], which, st, first, user, bias, base, !made[sub], step);
	made[sub] = 1;
	made[!sub] = 0;
	return s;
}

static char *aligned(void *ws) { return (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63); }

// A shared pass is open to helpers while its owner runs it: the owner and
// every helper take the next chunk no one has taken (next) until none is
// left. open is the pass's generation while it is open, 0 otherwise (a
// generation is never 0); inside counts the helpers between their check
// of open and their leaving. The owner closes the pass (open = 0) once it
// finds no chunk left, then waits for inside to drop to 0: with
// sequentially consistent atomics either the owner sees a helper inside
// and waits for it, or the helper sees the pass closed (or another
// generation's open) and touches nothing of it. A helper leaves after its
// chunks are complete, so the owner returns with every chunk written.
// failed holds the first failure of a helper's chunk, fstep its step, for
// the owner to return. chunks, written before open, lets
// tf_share_pending answer without entering.
struct tf_share {
	_Atomic unsigned long open;
	_Atomic long inside, next, chunks;
	_Atomic int failed;
	const char *fstep;
	long fail; // tests: 1 + a chunk that fails instead of running (tf_share_fail, between runs); 0: none
	const tf_conv *c;
	int which;
	const void *user[3];
	const float *bias;
};

tf_share *tf_share_new(void) { return calloc(1, sizeof(tf_share)); }

void tf_share_free(tf_share *sh) { free(sh); }

void tf_share_fail(tf_share *sh, long chunk) { sh->fail = chunk + 1; }

// take runs chunks of sh's pass on the calling thread until none is left,
// and returns the status of the first that failed, setting *step; *ran
// counts the chunks it took. The stream is made once a chunk is taken.
static dnnl_status_t take(tf_share *sh, char *base, long *ran, const char **step) {
	dnnl_stream_t st = NULL;
	dnnl_status_t s = dnnl_success;
	int made[2] = {0, 0};
	long n = atomic_load(&sh->chunks);
	for (;;) {
		long k = atomic_fetch_add(&sh->next, 1);
		if (k >= n) break;
		(*ran)++;
		if (!st && (s = dnnl_stream_create(&st, engine, dnnl_stream_default_flags)) != dnnl_success) *step = "stream";
		if (s == dnnl_success && sh->fail == k + 1) {
			s = dnnl_runtime_error;
			*step = "injected failure";
		}
		if (s == dnnl_success) s = run_chunk(sh->c, sh->which, st, k, sh->user, sh->bias, base, made, step);
		if (s != dnnl_success) {
			atomic_store(&sh->next, n); // no one starts another chunk
			break;
		}
	}
	if (st) {
		if (s == dnnl_success) {
			*step = "wait";
			s = dnnl_stream_wait(st);
		}
		dnnl_stream_destroy(st);
	}
	return s;
}

void tf_share_open(const tf_conv *c, int which, const float *in0, const float *in1, const float *bias, float *out, tf_share *sh, unsigned long gen) {
	sh->c = c;
	sh->which = which;
	sh->user[0] = in0;
	sh->user[1] = in1;
	sh->user[2] = out;
	sh->bias = bias;
	sh->fstep = NULL;
	atomic_store(&sh->failed, dnnl_success);
	atomic_store(&sh->chunks, nchunks(c));
	atomic_store(&sh->next, 0);
	// The kernel's gradient adds its chunks up in order, one after
	// another: it stays closed, and the owner takes every chunk, as it
	// does of a pass of generation 0.
	atomic_store(&sh->open, which == TF_KERNEL_GRAD ? 0 : gen);
}

int tf_share_finish(tf_share *sh, void *ws, const char **step) {
	one_thread();
	long ran = 0;
	dnnl_status_t s = take(sh, aligned(ws), &ran, step);
	atomic_store(&sh->open, 0);
	// A helper inside runs a chunk of a few hundred microseconds at most,
	// unless its thread lost its core: then yield it.
	for (long i = 1; atomic_load(&sh->inside) > 0; i++) {
		if (i % 1024 == 0) sched_yield();
		else _mm_pause();
	}
	int f = atomic_load(&sh->failed);
	if (s == dnnl_success && f != dnnl_success) {
		s = f;
		*step = sh->fstep;
	}
	// The caller's arrays are its own again.
	memset(sh->user, 0, sizeof sh->user);
	sh->bias = NULL;
	return s;
}

// tf_conv_run is a pass no one else may join: a share of its own that
// stays closed (generation 0), whose chunks the caller takes in order.
int tf_conv_run(const tf_conv *c, int which, const float *in0, const float *in1, const float *bias, float *out, void *ws, const char **step) {
	tf_share sh = {0};
	tf_share_open(c, which, in0, in1, bias, out, &sh, 0);
	return tf_share_finish(&sh, ws, step);
}

int tf_share_pending(tf_share *sh, unsigned long gen) {
	return gen && atomic_load(&sh->open) == gen && atomic_load(&sh->next) < atomic_load(&sh->chunks);
}

long tf_conv_help(tf_share *sh, unsigned long gen, void *ws) {
	long ran = 0;
	if (!gen) return 0;
	atomic_fetch_add(&sh->inside, 1);
	if (atomic_load(&sh->open) == gen) {
		one_thread();
		const char *step = NULL;
		dnnl_status_t s = take(sh, aligned(ws), &ran, &step);
		int none = dnnl_success;
		if (s != dnnl_success && atomic_compare_exchange_strong(&sh->failed, &none, (int)s)) sh->fstep = step;
	}
	atomic_fetch_sub(&sh->inside, 1);
	return ran;
}

const char *tf_version(void) {
	static char buf[64];
	const dnnl_version_t *v = dnnl_version();
	const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential" : "other";
	snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (%s)", v->major, v->minor, v->patch, rt);
	return buf;
}

int tf_avx512(void) {
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

int tf_bf16(void) {
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

struct tf_matmul {
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t prim;
	dnnl_memory_desc_t a, b, c, scratch;
};

int tf_matmul_create(long m, long n, long k, tf_matmul **out, const char **step) {
	one_thread();
	*out = NULL;
	if (!engine) TRY("engine", dnnl_engine_create(&engine, dnnl_cpu, 0));
	if (m <= 0 || n <= 0 || k <= 0) { *step = "dimensions"; return dnnl_invalid_arguments; }
	tf_matmul *mm = calloc(1, sizeof *mm);
	if (!mm) { *step = "memory"; return dnnl_out_of_memory; }
	dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
	dnnl_status_t s;
	const char *what = "layouts";
	if ((s = dnnl_memory_desc_init_by_tag(&mm->a, 2, ad, dnnl_bf16, dnnl_ab)) == dnnl_success &&
	    (s = dnnl_memory_desc_init_by_tag(&mm->b, 2, bd, dnnl_bf16, dnnl_ab)) == dnnl_success &&
	    (s = dnnl_memory_desc_init_by_tag(&mm->c, 2, cd, dnnl_f32, dnnl_ab)) == dnnl_success) {
		dnnl_matmul_desc_t d;
		what = "matmul";
		if ((s = dnnl_matmul_desc_init(&d, &mm->a, &mm->b, NULL, &mm->c)) == dnnl_success) {
			dnnl_primitive_attr_t a;
			what = "matmul attributes";
			if ((s = attr(&a, 0)) == dnnl_success) {
				what = "matmul implementation";
				s = dnnl_primitive_desc_create(&mm->pd, &d, a, engine, NULL);
				dnnl_primitive_attr_destroy(a);
			}
		}
	}
	if (s == dnnl_success) {
		size_t n = scratch_size(mm->pd);
		dnnl_dims_t sd = {(dnnl_dim_t)(n ? n : 1)};
		what = "scratchpad";
		s = dnnl_memory_desc_init_by_tag(&mm->scratch, 1, sd, dnnl_u8, dnnl_a);
	}
	if (s == dnnl_success) {
		what = "matmul primitive";
		s = dnnl_primitive_create(&mm->prim, mm->pd);
	}
	if (s != dnnl_success) {
		*step = what;
		if (mm->pd) dnnl_primitive_desc_destroy(mm->pd);
		free(mm);
		return s;
	}
	*out = mm;
	return dnnl_success;
}

size_t tf_matmul_workspace(const tf_matmul *mm) { return dnnl_memory_desc_get_size(&mm->scratch) + 64; }

const char *tf_matmul_impl(const tf_matmul *mm) { return pd_impl(mm->pd); }

int tf_matmul_run(const tf_matmul *mm, const void *a, const void *b, float *c, void *ws, const char **step) {
	one_thread();
	char *base = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, scratch = NULL;
	dnnl_stream_t st = NULL;
	dnnl_status_t s;
	*step = "memory";
	if ((s = dnnl_memory_create(&ma, &mm->a, engine, (void *)a)) != dnnl_success) goto done;
	if ((s = dnnl_memory_create(&mb, &mm->b, engine, (void *)b)) != dnnl_success) goto done;
	if ((s = dnnl_memory_create(&mc, &mm->c, engine, c)) != dnnl_success) goto done;
	if ((s = dnnl_memory_create(&scratch, &mm->scratch, engine, base)) != dnnl_success) goto done;
	*step = "stream";
	if ((s = dnnl_stream_create(&st, engine, dnnl_stream_default_flags)) != dnnl_success) goto done;
	dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, scratch}};
	*step = "matmul";
	if ((s = dnnl_primitive_execute(mm->prim, st, 4, args)) != dnnl_success) goto done;
	*step = "wait";
	s = dnnl_stream_wait(st);
done:
	if (st) dnnl_stream_destroy(st);
	if (ma) dnnl_memory_destroy(ma);
	if (mb) dnnl_memory_destroy(mb);
	if (mc) dnnl_memory_destroy(mc);
	if (scratch) dnnl_memory_destroy(scratch);
	return s;
}
