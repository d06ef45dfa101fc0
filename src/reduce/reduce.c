/* Datatypes, resolved ops, and the dispatch of every kernel call to the loops of one level
 * (see reduce.h and kernels.h). The level is the best one the CPU supports, detected once on
 * first use and kept in one atomic variable, so a call costs one relaxed load and two table
 * lookups before its loop; an entry a level leaves NULL runs the scalar loop instead. */
#include "reduce/reduce.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "reduce/kernels.h"
#include "util/err.h"
#include "util/log.h"

#ifdef TT_REDUCE_X86
#include <cpuid.h>
#include <xmmintrin.h>
#endif

#define DTYPE_ENTRY(dtype, stem, T, name, is_float) [dtype] = {name, sizeof(T), is_float},
static const struct {
    const char *name;
    size_t bytes;
    int is_float;
} dtypes[ncclNumTypes] = {TT_REDUCE_DTYPES(DTYPE_ENTRY)};
#define COUNT_ONE(...) +1
_Static_assert(0 TT_REDUCE_DTYPES(COUNT_ONE) == ncclNumTypes,
               "TT_REDUCE_DTYPES names every NCCL datatype once");

static int dtype_valid(ncclDataType_t dtype)
{
    return (unsigned)dtype < ncclNumTypes;
}

size_t tt_dtype_bytes(ncclDataType_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].bytes : 0;
}

const char *tt_dtype_name(ncclDataType_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].name : "invalid";
}

int tt_dtype_is_float(ncclDataType_t dtype)
{
    return dtype_valid(dtype) && dtypes[dtype].is_float;
}

/* ---------------------------------------------------------------------------------------------
 * Kernel levels. */

static const struct tt_reduce_kernels *const level_tables[TT_REDUCE_LEVEL_COUNT] = {
    [TT_REDUCE_LEVEL_SCALAR] = tt_reduce_scalar_kernels,
#ifdef TT_REDUCE_X86
    [TT_REDUCE_LEVEL_AVX2] = tt_reduce_avx2_kernels,
    [TT_REDUCE_LEVEL_AVX512] = tt_reduce_avx512_kernels,
#endif
};

static atomic_int best_level = -1;   /* detected on first use */
static atomic_int active_level = -1; /* the best level, or a forced one */
static atomic_bool level_forced;     /* tt_reduce_force_level was called */

/* The CPU's best level. __builtin_cpu_supports also checks that the OS saves the vector
 * registers (XCR0); F16C, which it cannot name on every compiler, comes from CPUID leaf 1 (every
 * AVX2 CPU has it, but a hypervisor may hide it). */
static int detect_level(void)
{
#ifdef TT_REDUCE_X86
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    /* The AVX-512 level uses AVX2's 256-bit integer instructions too (its fp8 loads): a CPU
     * model with AVX-512 and AVX2 masked off gets the scalar level, not SIGILL. */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") && f16c)
        return TT_REDUCE_LEVEL_AVX512;
    if (__builtin_cpu_supports("avx2") && f16c)
        return TT_REDUCE_LEVEL_AVX2;
#endif
    return TT_REDUCE_LEVEL_SCALAR;
}

int tt_reduce_level_best(void)
{
    int level = atomic_load_explicit(&best_level, memory_order_relaxed);
    if (level >= 0)
        return level;
    level = detect_level();
    int unset = -1;
    if (atomic_compare_exchange_strong(&best_level, &unset, level))
        TT_INFO(TT_SUB_INIT, "reduction kernels: %s", tt_reduce_level_name(level));
    return level;
}

int tt_reduce_level(void)
{
    int level = atomic_load_explicit(&active_level, memory_order_relaxed);
    if (level >= 0)
        return level;
    level = tt_reduce_level_best();
    int unset = -1;
    atomic_compare_exchange_strong(&active_level, &unset, level);
    return atomic_load_explicit(&active_level, memory_order_relaxed);
}

const char *tt_reduce_level_name(int level)
{
    static const char *const names[TT_REDUCE_LEVEL_COUNT] = {"scalar", "avx2", "avx512"};
    return level >= 0 && level < TT_REDUCE_LEVEL_COUNT ? names[level] : "invalid";
}

ncclResult_t tt_reduce_force_level(int level)
{
    int best = tt_reduce_level_best();
    if (level < 0 || level > best)
        return TT_ERROR(ncclInvalidArgument,
                        "reduction kernel level %d (%s) is not available: this CPU and build "
                        "support up to %d (%s)",
                        level, tt_reduce_level_name(level), best, tt_reduce_level_name(best));
    atomic_store_explicit(&active_level, level, memory_order_relaxed);
    atomic_store_explicit(&level_forced, true, memory_order_relaxed);
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * Dispatch. */

static tt_combine_fn combine_of(const struct tt_reduce_kernels *k, enum tt_redop_kind kind,
                                unsigned flags)
{
    switch (kind) {
    case TT_RED_PROD:
        return k->prod;
    case TT_RED_MAX:
        return k->max;
    case TT_RED_MIN:
        return k->min;
    case TT_RED_PREMULSUM:
        return (flags & TT_REDUCE_PRE) ? k->premulsum : k->sum;
    case TT_RED_SUMPOSTDIV:
        return (flags & TT_REDUCE_POST) ? k->sumdiv : k->sum;
    case TT_RED_SUM:
    default:
        return k->sum;
    }
}

/* The kernels for `count` elements of `dtype`: the active level's, except that less than a
 * cache line goes to the scalar ones, whose few instructions beat the vector kernels' setup
 * and masked tails there (a OneShot AllReduce of 8 bytes spent a tenth of its instructions in
 * them). Both compute the same values: unit_reduce checks every level against the scalar one.
 * A level forced by tt_reduce_force_level (tests) applies to every size. */
static const struct tt_reduce_kernels *kernels_for(ncclDataType_t dtype, size_t count)
{
    if (count * dtypes[dtype].bytes < 64 &&
        !atomic_load_explicit(&level_forced, memory_order_relaxed))
        return &tt_reduce_scalar_kernels[dtype];
    return &level_tables[tt_reduce_level()][dtype];
}

/* The floating-point mode of the calling thread (x86's MXCSR): flush-to-zero (bit 15),
 * denormals-are-zero (bit 6) and the rounding control (bits 13-14) may have been set by the
 * program (torch.set_flush_denormal, -ffast-math's start-up code) on one rank's thread and not
 * on another's, and where every rank computes the result itself (Tree, OneShot) the ranks would
 * then disagree. The kernels run in IEEE's default mode, with every exception masked (bits
 * 7-12): a program that unmasked one (feenableexcept) would otherwise take SIGFPE in one
 * level's conversion and not in another's (vcvtps2ph raises overflow, the scalar code rounds
 * with integers), and integer Avg divides in float lanes. The caller's mode is put back: one
 * register read on the way in, writes only where the mode differs. */
#ifdef TT_REDUCE_X86
#define FP_MODE_BITS 0xe040u
#define FP_MASK_ALL 0x1f80u
static inline unsigned fp_mode_of(unsigned csr)
{
    return (csr & ~FP_MODE_BITS) | FP_MASK_ALL;
}
static inline unsigned fp_mode_enter(ncclDataType_t dtype)
{
    (void)dtype; /* integer Avg uses float lanes too */
    unsigned csr = _mm_getcsr();
    if (fp_mode_of(csr) != csr) _mm_setcsr(fp_mode_of(csr));
    return csr;
}
static inline void fp_mode_leave(unsigned csr)
{
    if (fp_mode_of(csr) != csr) _mm_setcsr(csr);
}
#else
static inline unsigned fp_mode_enter(ncclDataType_t dtype)
{
    (void)dtype;
    return 0;
}
static inline void fp_mode_leave(unsigned csr)
{
    (void)csr;
}
#endif

static void combine_at_level(const struct tt_redop *op, void *dst, void *dst2, const void *local,
                             const void *in, size_t count, unsigned flags)
{
    if (count == 0)
        return;
    const struct tt_reduce_kernels *k = kernels_for(op->dtype, count);
    tt_combine_fn fn = combine_of(k, op->kind, flags);
    if (fn == NULL)
        fn = combine_of(&tt_reduce_scalar_kernels[op->dtype], op->kind, flags);
    unsigned mode = fp_mode_enter(op->dtype);
    fn(dst, dst2, local, in, count, op);
    fp_mode_leave(mode);
}

void tt_reduce_copy(const struct tt_redop *op, void *dst, const void *src, size_t count,
                    unsigned flags)
{
    if (count == 0)
        return;
    const struct tt_reduce_kernels *k = kernels_for(op->dtype, count);
    const struct tt_reduce_kernels *scalar = &tt_reduce_scalar_kernels[op->dtype];
    if (op->kind == TT_RED_PREMULSUM && (flags & TT_REDUCE_PRE)) {
        unsigned mode = fp_mode_enter(op->dtype);
        (k->premul != NULL ? k->premul : scalar->premul)(dst, src, count, op);
        fp_mode_leave(mode);
    } else if (op->kind == TT_RED_SUMPOSTDIV && (flags & TT_REDUCE_POST)) {
        (k->div != NULL ? k->div : scalar->div)(dst, src, count, op);
    } else if (dst != src)
        memcpy(dst, src, count * dtypes[op->dtype].bytes);
}

void tt_reduce_combine(const struct tt_redop *op, void *dst, const void *local, const void *in,
                       size_t count, unsigned flags)
{
    combine_at_level(op, dst, NULL, local, in, count, flags);
}

void tt_reduce_combine2(const struct tt_redop *op, void *dst1, void *dst2, const void *local,
                        const void *in, size_t count, unsigned flags)
{
    combine_at_level(op, dst1, dst1 == dst2 ? NULL : dst2, local, in, count, flags);
}

void tt_copy_stream(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return;
#ifdef TT_REDUCE_X86
    switch (tt_reduce_level()) {
    case TT_REDUCE_LEVEL_AVX512:
        tt_copy_stream_avx512(dst, src, bytes);
        return;
    case TT_REDUCE_LEVEL_AVX2:
        tt_copy_stream_avx2(dst, src, bytes);
        return;
    default:
        break;
    }
#endif
    memcpy(dst, src, bytes);
}

/* ---------------------------------------------------------------------------------------------
 * Resolving ops. */

/* 1/n rounded to nearest even in a floating dtype. Double division is correctly rounded as it
 * stands. For the narrower types, q = floor(2^63 / n) with its last bit forced to 1 when the
 * division left a remainder keeps every bit that matters: converting it to float rounds
 * correctly, and truncating it to 24 bits with that sticky bit (rounding to odd) gives a float
 * from which one rounding to nearest lands where a direct rounding of 1/n would, since 24 bits
 * exceed the target's precision by at least two. */
static double reciprocal_in(ncclDataType_t dtype, int n)
{
    if (dtype == ncclFloat64)
        return 1.0 / n;
    const uint64_t top = UINT64_C(1) << 63;
    const uint64_t q = top / (uint64_t)n | (top % (uint64_t)n != 0);
    if (dtype == ncclFloat32)
        return ldexp((double)(float)q, -63);
    const int shift = 40 - __builtin_clzll(q); /* q has at least 33 bits: shift >= 9 */
    const uint64_t odd = q >> shift | ((q & ((UINT64_C(1) << shift) - 1)) != 0);
    const float f = (float)ldexp((double)odd, shift - 63);
    switch (dtype) {
    case ncclFloat16:
        return tt_half_to_float(tt_float_to_half(f));
    case ncclBfloat16:
        return tt_bf16_to_float(tt_float_to_bf16(f));
    case ncclFloat8e4m3:
        return tt_e4m3_to_float(tt_float_to_e4m3(f));
    case ncclFloat8e5m2:
    default:
        return tt_e5m2_to_float(tt_float_to_e5m2(f));
    }
}

ncclResult_t tt_redop_init(struct tt_redop *op, ncclRedOp_t red, ncclDataType_t dtype, int nranks)
{
    if (!dtype_valid(dtype))
        return TT_ERROR(ncclInvalidArgument, "invalid datatype %d (valid: 0 to %d)", (int)dtype,
                        ncclNumTypes - 1);
    if (nranks < 1)
        return TT_ERROR(ncclInvalidArgument, "invalid rank count %d for a reduction op", nranks);
    memset(op, 0, sizeof(*op));
    op->dtype = dtype;
    op->divisor = 1;
    switch (red) {
    case ncclSum:
        op->kind = TT_RED_SUM;
        break;
    case ncclProd:
        op->kind = TT_RED_PROD;
        break;
    case ncclMax:
        op->kind = TT_RED_MAX;
        break;
    case ncclMin:
        op->kind = TT_RED_MIN;
        break;
    case ncclAvg:
        if (dtypes[dtype].is_float) {
            op->kind = TT_RED_PREMULSUM;
            op->scalar.f = reciprocal_in(dtype, nranks);
        } else {
            op->kind = TT_RED_SUMPOSTDIV;
            op->divisor = (uint64_t)nranks;
        }
        break;
    default:
        return TT_ERROR(ncclInvalidArgument,
                        "invalid reduction op %d (valid built-in ops: ncclSum, ncclProd, "
                        "ncclMax, ncclMin, ncclAvg)",
                        (int)red);
    }
    return ncclSuccess;
}

ncclResult_t tt_redop_init_premulsum(struct tt_redop *op, ncclDataType_t dtype,
                                     const void *scalar)
{
    if (!dtype_valid(dtype))
        return TT_ERROR(ncclInvalidArgument, "invalid datatype %d (valid: 0 to %d)", (int)dtype,
                        ncclNumTypes - 1);
    if (scalar == NULL)
        return TT_ERROR(ncclInvalidArgument, "NULL scalar for a %s PreMulSum op",
                        dtypes[dtype].name);
    memset(op, 0, sizeof(*op));
    op->kind = TT_RED_PREMULSUM;
    op->dtype = dtype;
    op->divisor = 1;
    /* One representation per width; memcpy because the scalar need not be aligned. */
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    switch (dtype) {
    case ncclInt8:
        memcpy(&u8, scalar, 1);
        op->scalar.i = (int8_t)u8;
        break;
    case ncclUint8:
        memcpy(&u8, scalar, 1);
        op->scalar.u = u8;
        break;
    case ncclInt32:
        memcpy(&u32, scalar, 4);
        op->scalar.i = (int32_t)u32;
        break;
    case ncclUint32:
        memcpy(&u32, scalar, 4);
        op->scalar.u = u32;
        break;
    case ncclInt64:
    case ncclUint64:
        memcpy(&u64, scalar, 8);
        op->scalar.u = u64;
        break;
    case ncclFloat16:
        memcpy(&u16, scalar, 2);
        op->scalar.f = tt_half_to_float(u16);
        break;
    case ncclFloat32:
        memcpy(&f32, scalar, 4);
        op->scalar.f = f32;
        break;
    case ncclFloat64:
        memcpy(&op->scalar.f, scalar, 8);
        break;
    case ncclBfloat16:
        memcpy(&u16, scalar, 2);
        op->scalar.f = tt_bf16_to_float(u16);
        break;
    case ncclFloat8e4m3:
        memcpy(&u8, scalar, 1);
        op->scalar.f = tt_e4m3_to_float(u8);
        break;
    case ncclFloat8e5m2:
    default:
        memcpy(&u8, scalar, 1);
        op->scalar.f = tt_e5m2_to_float(u8);
        break;
    }
    return ncclSuccess;
}
