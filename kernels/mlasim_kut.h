/* kernels/mlasim_kut.h - the kernel-under-test ABI of mlasim (docs/kernel-under-test.md), version 1.
 *
 * A kernel under test is a shared library that mlasim loads with dlopen
 * (`mlasim fuzz --gpu sentinel --kernel-under-test PATH.so`, `mlasim replay --gpu
 * --kernel-under-test PATH.so CASE.json`) and calls once per decode call and once per reduce call
 * of a simulated engine step: aiter's persistent MLA decode, stage 1 (mla_decode_stage1_asm_fwd,
 * docs/aiter-mla-metadata.md section 11) and stage 2 (mla_reduce_v1, section 12). mlasim allocates
 * every buffer the call receives (with sentinel bytes or guard pages around it), fills the
 * inputs, poisons the outputs, runs the call, and compares what the kernel did with what its
 * declared contract (docs/contracts.md) and the numerics reference say it must do.
 *
 * The header is C99 (and C++): plain structs of fixed-width fields, no enums in structs, one
 * version number. A library exports three functions and may export a fourth:
 *
 *   uint32_t mlasim_kut_abi_version(void);                                   required
 *   int mlasim_kut_describe(const char* config, mlasim_kut_info* info);      required
 *   int mlasim_kut_run(const mlasim_kut_call* call);                         required
 *   const char* mlasim_kut_last_error(void);                                 optional
 *
 * mlasim calls mlasim_kut_abi_version first and refuses a library whose answer differs from
 * MLASIM_KUT_ABI_VERSION, or that lacks a required symbol, before it reads any struct. Every
 * library call runs in a worker process, so a library that crashes or hangs ends that worker,
 * not the campaign (the worker is replaced and the call is reported).
 *
 * Units: rows, heads and columns are counts; byte sizes and strides are bytes; tokens are KV
 * positions. "Row" of q / o / lse / the partial buffers is one q token (all its heads).
 */
#ifndef MLASIM_KUT_H_
#define MLASIM_KUT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLASIM_KUT_ABI_VERSION 1u

/* Element types (mlasim_kut_tensor.dtype; bit (1 << dtype) in the info masks). */
#define MLASIM_KUT_BF16 1
#define MLASIM_KUT_FP16 2
#define MLASIM_KUT_FP32 3
#define MLASIM_KUT_FP8_E4M3FN 4
#define MLASIM_KUT_INT32 5
#define MLASIM_KUT_DTYPE_BIT(dtype) (1u << (dtype))

/* Operations (mlasim_kut_call.op; bit (1 << op) in mlasim_kut_info.ops). */
#define MLASIM_KUT_OP_DECODE 1 /* stage 1: every work item of the plan (section 11) */
#define MLASIM_KUT_OP_REDUCE 2 /* stage 2: every reduce tile with >= 2 pieces (section 12) */
#define MLASIM_KUT_OP_BIT(op) (1u << (op))

/* Where the call's buffers live (mlasim_kut_info.memory). */
#define MLASIM_KUT_MEMORY_HOST 1   /* host memory: the library runs on the CPU */
#define MLASIM_KUT_MEMORY_DEVICE 2 /* device memory of mlasim_kut_call.device (HIP / CUDA) */

/* Return codes of mlasim_kut_describe and mlasim_kut_run. */
#define MLASIM_KUT_OK 0
#define MLASIM_KUT_UNSUPPORTED 1 /* the kernel does not run this call (shape, dtype, config) */
#define MLASIM_KUT_ERROR 2       /* the call failed (a device error); mlasim_kut_last_error says */

/* One buffer as the call receives it: `rows` rows of `heads` x `cols` elements of `dtype`, row r
 * head h column c at data + r * row_stride + h * head_stride + c * element size. The buffer is the
 * `bytes` bytes from `data` (its end is data + bytes; rows * row_stride <= bytes); anything
 * outside them belongs to mlasim (sentinel bytes or an unmapped guard page). A tensor the call
 * does not pass has data == NULL and bytes == 0. */
typedef struct mlasim_kut_tensor {
  void* data;
  uint64_t bytes;
  int64_t rows;
  int64_t row_stride;  /* bytes between rows */
  int64_t head_stride; /* bytes between heads of a row (2-D tensors: 0) */
  int32_t heads;       /* 2-D tensors: 1 */
  int32_t cols;        /* elements per (row, head) */
  int32_t dtype;       /* MLASIM_KUT_BF16 ... */
  int32_t reserved;    /* 0 */
} mlasim_kut_tensor;

/* One decode or reduce call. mlasim fills every field; the kernel reads the tensors it needs
 * (decode: q, kv_cache, kv_indices or topk_indices, kv_indptr, kv_last_page_lens, qo_indptr,
 * work_indptr, work_info; writes o, lse, partial_o, partial_lse. Reduce: reduce_indptr,
 * reduce_final_map, reduce_partial_map, partial_o, partial_lse; writes o and lse). */
typedef struct mlasim_kut_call {
  uint32_t abi_version;  /* MLASIM_KUT_ABI_VERSION */
  uint32_t struct_bytes; /* sizeof(mlasim_kut_call) */
  int32_t op;            /* MLASIM_KUT_OP_DECODE or MLASIM_KUT_OP_REDUCE */
  int32_t device;        /* device index (MEMORY_DEVICE); 0 on the host */
  void* stream;          /* hipStream_t / cudaStream_t to launch on (NULL: the default stream);
                            host kernels: NULL. mlasim synchronises after the call returns. */
  const char* config;    /* the kernel's own configuration text (--kernel-config), "" if none */

  /* Dims. Rows of q / o are tokens; the kernel sees num_heads heads per token (the heads of one
   * rank, after the engine's head layout) and one KV head. */
  int32_t batch;         /* requests: qo_indptr / kv_indptr hold batch + 1 entries */
  int32_t num_heads;     /* q heads per token */
  int32_t num_kv_heads;  /* 1 (MLA) */
  int32_t head_dim_qk;   /* D: q and K width (MLA: 576 = 512 latent + 64 rope) */
  int32_t head_dim_v;    /* Dv: V = the first Dv columns of a KV row (MLA: 512) */
  int32_t page_size;     /* tokens per KV page */
  int32_t num_pages;     /* pages of kv_cache (its rows: num_pages * page_size) */
  int32_t max_seqlen_q;  /* most q tokens of one request: partial buffers hold pieces x this */
  int32_t causal;        /* 1: q row i of a request with Lq rows and Lk keys sees keys j <=
                            i + Lk - Lq (bottom-right aligned, section 11.3); dense only */
  int32_t topk;          /* -1: dense (page table); >= 0: sparse top-k, page_size 1 */
  float softmax_scale;   /* multiplies q . k (natural-log units); q_scale and kv_scale too */
  float q_scale;         /* value = stored * scale, per tensor */
  float kv_scale;
  int32_t reserved0;

  /* Inputs. */
  mlasim_kut_tensor q;            /* [q rows, num_heads, head_dim_qk] */
  mlasim_kut_tensor kv_cache;     /* [num_pages * page_size rows, 1, head_dim_qk] */
  mlasim_kut_tensor kv_indices;   /* int32 page ids, positions kv_indptr[b] .. kv_indptr[b+1] */
  mlasim_kut_tensor topk_indices; /* int32 [q rows, 1, topk] KV-cache rows per token; entries
                                     outside [0, kv_cache rows) are invalid (-1, INT_MAX, ...) */
  mlasim_kut_tensor kv_indptr;         /* int32 [batch + 1], pages (sparse: per-token lengths) */
  mlasim_kut_tensor kv_last_page_lens; /* int32 [batch], tokens in each request's last page */
  mlasim_kut_tensor qo_indptr;         /* int32 [batch + 1], q rows */

  /* The plan (docs/aiter-mla-metadata.md sections 10-12), as allocated by the engine: the
   * buffers may be larger than the plan's contents. */
  mlasim_kut_tensor work_indptr;        /* int32 [clusters + 1] */
  mlasim_kut_tensor work_info;          /* int32 [works, 1, 8]: batch_idx, partial_qo_loc,
                                           qo_start, qo_end, kv_start, kv_end, kv_offset, pad */
  mlasim_kut_tensor reduce_indptr;      /* int32 [tiles + 1] */
  mlasim_kut_tensor reduce_final_map;   /* int32 [tiles, 1, 2]: q_start, q_end */
  mlasim_kut_tensor reduce_partial_map; /* int32 [pieces]: first partial row of each piece */

  /* Outputs (poisoned with NaN bytes before the call). */
  mlasim_kut_tensor o;           /* [o rows, num_heads, head_dim_v] */
  mlasim_kut_tensor lse;         /* fp32 [o rows, num_heads], natural log */
  mlasim_kut_tensor partial_o;   /* fp32 [partial rows, num_heads, head_dim_v] (aiter: logits) */
  mlasim_kut_tensor partial_lse; /* fp32 [partial rows, num_heads] (aiter: attn_lse) */

  /* Optional: NULL, or 4 uint64 in the call's memory that a kernel may use to record the rows it
   * touched, as atomic min / max: [q row min, q row max + 1, o row min, o row max + 1], set to
   * {UINT64_MAX, 0, UINT64_MAX, 0} before the call. mlasim reports them; nothing depends on it. */
  uint64_t* access_log;
} mlasim_kut_call;

/* What a kernel library runs, filled by mlasim_kut_describe. Strings have static storage (they
 * must stay valid until the library is unloaded). */
typedef struct mlasim_kut_info {
  uint32_t abi_version;  /* the library writes MLASIM_KUT_ABI_VERSION */
  uint32_t struct_bytes; /* mlasim sets sizeof(mlasim_kut_info) before the call */
  const char* name;      /* "mlasim-cpu", "aiter-asm-mla" */
  uint32_t ops;          /* MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | ... */
  int32_t memory;        /* MLASIM_KUT_MEMORY_HOST or MLASIM_KUT_MEMORY_DEVICE */
  uint32_t q_dtypes;     /* MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) | ... */
  uint32_t kv_dtypes;
  uint32_t o_dtypes;
  int32_t heads_multiple;      /* num_heads must be a multiple of it (>= 1) */
  int32_t max_heads;           /* 0: no limit */
  int32_t head_dim_qk_multiple; /* head_dim_qk must be a multiple of it, at most the max */
  int32_t max_head_dim_qk;
  int32_t head_dim_v_multiple;
  int32_t max_head_dim_v;
  int32_t max_page_size;       /* 0: no limit */
  int32_t dense;               /* 1: runs dense (page-table) calls */
  int32_t sparse;              /* 1: runs sparse top-k calls */
  int32_t page_size_multiple;  /* page_size must be a multiple of it; 0 or 1: any (this field
                                  was reserved0, always 0, before: such libraries stay valid) */
  /* The access contracts (docs/contracts.md) mlasim checks the kernel against, one per call
   * kind: JSON text (starting with '{'), "builtin:VARIANT" (asm, opus, hk, mla_reduce_v1,
   * flashmla_dense, flashinfer_fa3, in_decode: sim/contracts/), or a
   * file path (relative paths: from the library's folder). NULL: builtin:asm / builtin:
   * mla_reduce_v1. */
  const char* decode_contract;
  const char* reduce_contract;
} mlasim_kut_info;

/* The entry points, as function pointer types for dlsym. */
typedef uint32_t (*mlasim_kut_abi_version_fn)(void);
typedef int (*mlasim_kut_describe_fn)(const char* config, mlasim_kut_info* info);
typedef int (*mlasim_kut_run_fn)(const mlasim_kut_call* call);
typedef const char* (*mlasim_kut_last_error_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* MLASIM_KUT_H_ */
