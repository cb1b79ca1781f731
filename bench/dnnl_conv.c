/*
 * oneDNN's convolutions on ResNet-20's stride-1 shapes (a tower's 64
 * CIFAR-10 images, 3x3, padding 1), forward, input gradient and kernel
 * gradient, in the layouts oneDNN picks ("any": blocked, nChw16c) and in
 * plain NCHW: the figures to weigh a oneDNN binding against layers'
 * tap products (go test -tags openblas -run - -bench Conv ./layers prints
 * theirs in the same units, useful GFLOP/s).
 *
 *   apt-get install libdnnl-dev
 *   gcc -O2 bench/dnnl_conv.c -ldnnl -o /tmp/dnnl_conv && OMP_NUM_THREADS=1 /tmp/dnnl_conv
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(f) do { dnnl_status_t s_ = (f); if (s_ != dnnl_success) { printf("%s: %d\n", #f, s_); exit(1);} } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static dnnl_engine_t eng; static dnnl_stream_t st;

static dnnl_memory_t mem(const dnnl_memory_desc_t *md) {
	dnnl_memory_t m; CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
	void *p; CHECK(dnnl_memory_get_data_handle(m, &p));
	memset(p, 0, dnnl_memory_desc_get_size(md));
	float *f = p; size_t n = dnnl_memory_desc_get_size(md) / 4; for (size_t i = 0; i < n; i++) f[i] = (float)((i % 13) - 6) * 0.1f;
	return m;
}

static void bench(int N, int C, int F, int HW, dnnl_format_tag_t tag, const char *tagname) {
	dnnl_dims_t sd = {N, C, HW, HW}, wd = {F, C, 3, 3}, dd = {N, F, HW, HW};
	dnnl_dims_t strides = {1, 1}, pad = {1, 1};
	dnnl_memory_desc_t s_md, w_md, d_md;
	CHECK(dnnl_memory_desc_init_by_tag(&s_md, 4, sd, dnnl_f32, tag));
	CHECK(dnnl_memory_desc_init_by_tag(&w_md, 4, wd, dnnl_f32, tag == dnnl_format_tag_any ? dnnl_format_tag_any : dnnl_oihw));
	CHECK(dnnl_memory_desc_init_by_tag(&d_md, 4, dd, dnnl_f32, tag));
	double flops = 2.0 * N * F * C * 9 * HW * HW;
	// forward
	dnnl_convolution_desc_t fd; CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &s_md, &w_md, NULL, &d_md, strides, pad, pad));
	dnnl_primitive_desc_t fpd; CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
	const char *impl; CHECK(dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl));
	dnnl_memory_t S = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0));
	dnnl_memory_t W = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
	dnnl_memory_t D = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0));
	dnnl_primitive_t fp; CHECK(dnnl_primitive_create(&fp, fpd));
	dnnl_exec_arg_t fa[3] = {{DNNL_ARG_SRC, S}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_DST, D}};
	// backward data
	dnnl_convolution_desc_t bdd; CHECK(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &s_md, &w_md, &d_md, strides, pad, pad));
	dnnl_primitive_desc_t bdpd; CHECK(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, eng, fpd));
	const char *impl2; CHECK(dnnl_primitive_desc_query(bdpd, dnnl_query_impl_info_str, 0, &impl2));
	dnnl_memory_t DS = mem(dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_src_md, 0));
	dnnl_memory_t W2 = mem(dnnl_primitive_desc_query_md(bdpd, dnnl_query_weights_md, 0));
	dnnl_memory_t DD = mem(dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_dst_md, 0));
	dnnl_primitive_t bdp; CHECK(dnnl_primitive_create(&bdp, bdpd));
	dnnl_exec_arg_t ba[3] = {{DNNL_ARG_DIFF_SRC, DS}, {DNNL_ARG_WEIGHTS, W2}, {DNNL_ARG_DIFF_DST, DD}};
	// backward weights
	dnnl_convolution_desc_t bwd; CHECK(dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &s_md, &w_md, NULL, &d_md, strides, pad, pad));
	dnnl_primitive_desc_t bwpd; CHECK(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, eng, fpd));
	const char *impl3; CHECK(dnnl_primitive_desc_query(bwpd, dnnl_query_impl_info_str, 0, &impl3));
	dnnl_memory_t S3 = mem(dnnl_primitive_desc_query_md(bwpd, dnnl_query_src_md, 0));
	dnnl_memory_t DW = mem(dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_weights_md, 0));
	dnnl_memory_t DD3 = mem(dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_dst_md, 0));
	dnnl_primitive_t bwp; CHECK(dnnl_primitive_create(&bwp, bwpd));
	dnnl_exec_arg_t wa[3] = {{DNNL_ARG_SRC, S3}, {DNNL_ARG_DIFF_WEIGHTS, DW}, {DNNL_ARG_DIFF_DST, DD3}};
	struct { const char *n; dnnl_primitive_t p; dnnl_exec_arg_t *a; const char *impl; } ps[3] = {{"forward", fp, fa, impl}, {"input", bdp, ba, impl2}, {"kernel", bwp, wa, impl3}};
	for (int k = 0; k < 3; k++) {
		CHECK(dnnl_primitive_execute(ps[k].p, st, 3, ps[k].a)); CHECK(dnnl_stream_wait(st));
		double best = 1e9;
		for (int r = 0; r < 5; r++) {
			double t = now();
			for (int i = 0; i < 10; i++) CHECK(dnnl_primitive_execute(ps[k].p, st, 3, ps[k].a));
			CHECK(dnnl_stream_wait(st));
			double d = (now() - t) / 10; if (d < best) best = d;
		}
		printf("%dx%dx%d→%d %-6s %-8s %7.1f GFLOP/s %7.3f ms  (%s)\n", C, HW, HW, F, tagname, ps[k].n, flops / best / 1e9, best * 1e3, ps[k].impl);
	}
}

int main(void) {
	CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
	int shapes[4][3] = {{3, 16, 32}, {16, 16, 32}, {32, 32, 16}, {64, 64, 8}};
	for (int i = 0; i < 4; i++) {
		bench(64, shapes[i][0], shapes[i][1], shapes[i][2], dnnl_format_tag_any, "any");
		bench(64, shapes[i][0], shapes[i][1], shapes[i][2], dnnl_nchw, "nchw");
	}
	return 0;
}
