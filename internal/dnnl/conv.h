// The C side of package dnnl (build tag dnnl): oneDNN convolutions over
// plain NCHW or NHWC and OIHW float32 arrays, each run reordering NCHW
// images into and out of the layouts oneDNN's fastest implementation
// picks; NHWC images are computed on in place.

#include <stddef.h>
#include <stdint.h>

typedef struct tf_conv tf_conv;

// tf_geom is a convolution: the input's N, C, H, W; the kernel's F, KH, KW;
// stride, padding, output height and width; a bias and a fused ReLU (0, 1);
// and how many images each primitive run takes (the batch runs a chunk at
// a time, so that a chunk's copies stay in cache); and bf16: whether each
// pass reads its two inputs in bfloat16 (converted, rounding to nearest
// even, on the way into the layouts the primitive wants) and accumulates
// and writes its output in float32; and nhwc: whether the images (the
// input, the output and their gradients) are NHWC rather than NCHW.
typedef struct {
	long n, c, h, w, f, kh, kw, sh, sw, ph, pw, oh, ow;
	int bias, relu;
	long chunk;
	int bf16;
	int one_step; // bf16: convert each input in one oneDNN reorder (tests)
	int nhwc;
} tf_geom;

enum { TF_FORWARD, TF_INPUT_GRAD, TF_KERNEL_GRAD, TF_PASSES };

// tf_conv_create makes the three passes of a convolution; on failure it
// returns oneDNN's status and sets *step to what failed.
int tf_conv_create(const tf_geom *g, tf_conv **out, const char **step);
void tf_conv_destroy(tf_conv *c);
// tf_conv_workspace is the bytes pass needs besides its arguments.
size_t tf_conv_workspace(const tf_conv *c, int pass);
// tf_conv_impl names the oneDNN implementation that runs pass (on a full
// chunk).
const char *tf_conv_impl(const tf_conv *c, int pass);
// tf_conv_reorder_impl names the oneDNN implementation that changes the
// layout of input arg (0, 1) of pass (on a full chunk): "" where the
// input needs no reorder.
const char *tf_conv_reorder_impl(const tf_conv *c, int pass, int arg);
// tf_conv_convert_impl names what converts input arg (0, 1) of pass (on a
// full chunk) to bfloat16: TF_CONVERT_IMPL where tf_f32_to_bf16 does, the
// oneDNN implementation where a reorder does, "" where nothing does.
const char *tf_conv_convert_impl(const tf_conv *c, int pass, int arg);
#define TF_CONVERT_IMPL "tf_f32_to_bf16"
// tf_f32_to_bf16 sets dst[i] to src[i] rounded to bfloat16 as
// bf16.FromFloat32 rounds it (to nearest, ties to even; a NaN stays a
// quiet NaN of its sign; no flush to zero), for i < n: with AVX-512, 32
// and then 16 at a time, where the CPU has it.
void tf_f32_to_bf16(uint16_t *dst, const float *src, long n);
// tf_conv_run runs pass: forward y = conv(x, k) (+ bias, ReLU) from
// (in0, in1, bias) = (x, k, b); the input's gradient from (dy, k); the
// kernel's from (x, dy). ws holds tf_conv_workspace bytes, any alignment.
int tf_conv_run(const tf_conv *c, int pass, const float *in0, const float *in1, const float *bias, float *out, void *ws, const char **step);
// tf_share is a pass of a convolution open, while one thread (its owner)
// runs it, to other threads that join it (helpers): each takes the next
// chunk of the batch no one has taken until none is left. A chunk's values
// do not depend on the thread that computes it.
typedef struct tf_share tf_share;
tf_share *tf_share_new(void);
void tf_share_free(tf_share *sh);
// tf_share_fail makes chunk (from 0) of sh's later passes fail, with the
// step "injected failure", instead of running, on whichever thread takes
// it; -1: none (tests; only between the owner's runs).
void tf_share_fail(tf_share *sh, long chunk);
// tf_share_open and tf_share_finish are the owner's run of a pass shared
// in sh under generation gen (nonzero, a new one for each run): open makes
// the chunks of a forward or input gradient pass open to tf_conv_help
// (the kernel's gradient, whose chunks add up in order, it leaves closed);
// finish takes chunks until none is left, closes the pass, waits for the
// helpers inside and returns the first failure of any, as tf_conv_run
// does. Every chunk is done, by whichever thread, when finish returns.
void tf_share_open(const tf_conv *c, int pass, const float *in0, const float *in1, const float *bias, float *out, tf_share *sh, unsigned long gen);
int tf_share_finish(tf_share *sh, void *ws, const char **step);
// tf_share_pending is 1 while the pass of generation gen (nonzero) looks
// open in sh with chunks no one has taken: a hint, which tf_conv_help
// checks again.
int tf_share_pending(tf_share *sh, unsigned long gen);
// tf_conv_help runs chunks of the pass of generation gen (nonzero) open in
// sh, if it is, with the workspace ws (tf_conv_workspace bytes of the
// pass's convolution), and returns how many it took. A failure is left for
// the owner to return.
long tf_conv_help(tf_share *sh, unsigned long gen, void *ws);
// tf_version is oneDNN's version and CPU runtime.
const char *tf_version(void);
typedef struct tf_matmul tf_matmul;

// tf_matmul_create makes c = a·b for row-major a (m×k) and b (k×n) in
// bfloat16 and c (m×n) in float32, summed in float32.
int tf_matmul_create(long m, long n, long k, tf_matmul **out, const char **step);
// tf_matmul_workspace is the bytes a run needs for its scratchpad.
size_t tf_matmul_workspace(const tf_matmul *mm);
const char *tf_matmul_impl(const tf_matmul *mm);
int tf_matmul_run(const tf_matmul *mm, const void *a, const void *b, float *c, void *ws, const char **step);
// tf_bf16 is 1 where oneDNN runs bfloat16 convolutions natively: its
// effective ISA has AVX512_BF16 (avx512_core_bf16 or above).
int tf_bf16(void);
// tf_avx512 is 1 where oneDNN's effective ISA has AVX-512 (avx512_core or
// above).
int tf_avx512(void);
