/*
 * nxr floating-point environment, the registers: reading and writing the
 * calling thread's FP control state. x86-64: MXCSR (SSE/AVX arithmetic:
 * bits 0-5 sticky flags, 6 DAZ, 7-12 exception masks, 13-14 rounding,
 * 15 FTZ) and the x87 control word; aarch64: FPCR (22-23 rounding, 24 FZ).
 * Elsewhere nothing is observable (nxr__fpenv_supported() is false) and the
 * accessors are no-ops, so callers never branch on the architecture.
 */
#ifndef NXR_KERNELS_INTERNAL_FPENV_ARCH_H
#define NXR_KERNELS_INTERNAL_FPENV_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/nxr_provider.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define NXR_MXCSR_CONTROL 0xffc0u /* everything but the sticky flags */
#define NXR_MXCSR_DAZ     (1u << 6)
#define NXR_MXCSR_FTZ     (1u << 15)
#define NXR_MXCSR_DEFAULT 0x1f80u /* all masked, nearest, no FTZ/DAZ */
#define NXR_X87_CONTROL   0x1f3fu /* masks, precision and rounding */
#define NXR_X87_DEFAULT   0x033fu /* 0x037f masked: all masked, 64-bit mantissa, nearest */

static inline bool nxr__fpenv_supported(void)
{
    return true;
}

static inline unsigned nxr__fpenv_read_control(void)
{
    uint32_t m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    return m & NXR_MXCSR_CONTROL;
}

/* Writes the control bits, keeps the current sticky flags. */
static inline void nxr__fpenv_write_control(unsigned control)
{
    uint32_t m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    m = (m & ~NXR_MXCSR_CONTROL) | (control & NXR_MXCSR_CONTROL);
    __asm__ volatile("ldmxcsr %0" : : "m"(m) : "memory");
}

static inline unsigned nxr__fpenv_read_x87(void)
{
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    return cw & NXR_X87_CONTROL;
}

static inline void nxr__fpenv_write_x87(unsigned control)
{
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    cw = (uint16_t)((cw & ~NXR_X87_CONTROL) | (control & NXR_X87_CONTROL));
    __asm__ volatile("fldcw %0" : : "m"(cw) : "memory");
}

/* The control bit that flushes results to zero (tests flip it). */
static inline unsigned nxr__fpenv_ftz_bit(void)
{
    return NXR_MXCSR_FTZ;
}

static inline bool nxr__fpenv_ftz(unsigned control)
{
    return (control & NXR_MXCSR_FTZ) != 0;
}

static inline bool nxr__fpenv_daz(unsigned control)
{
    return (control & NXR_MXCSR_DAZ) != 0;
}

/* MXCSR's RC field uses nxr's encoding: 0 nearest, 1 down, 2 up, 3 zero. */
static inline enum nxr_rounding nxr__fpenv_rounding(unsigned control)
{
    return (enum nxr_rounding)((control >> 13) & 3u);
}

static inline bool nxr__fpenv_default(unsigned control, unsigned x87)
{
    return control == NXR_MXCSR_DEFAULT && x87 == NXR_X87_DEFAULT;
}

#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))

#define NXR_FPCR_FZ (1u << 24)

static inline bool nxr__fpenv_supported(void)
{
    return true;
}

static inline unsigned nxr__fpenv_read_control(void)
{
    uint64_t r;
    __asm__ volatile("mrs %0, fpcr" : "=r"(r));
    return (unsigned)r;
}

static inline void nxr__fpenv_write_control(unsigned control)
{
    uint64_t r = control;
    __asm__ volatile("msr fpcr, %0" : : "r"(r) : "memory");
}

static inline unsigned nxr__fpenv_read_x87(void)
{
    return 0;
}

static inline void nxr__fpenv_write_x87(unsigned control)
{
    (void)control;
}

static inline unsigned nxr__fpenv_ftz_bit(void)
{
    return NXR_FPCR_FZ;
}

static inline bool nxr__fpenv_ftz(unsigned control)
{
    return (control & NXR_FPCR_FZ) != 0;
}

/* aarch64's FZ flushes inputs as well as outputs. */
static inline bool nxr__fpenv_daz(unsigned control)
{
    return (control & NXR_FPCR_FZ) != 0;
}

/* FPCR.RMode: 0 nearest, 1 toward +inf, 2 toward -inf, 3 toward zero. */
static inline enum nxr_rounding nxr__fpenv_rounding(unsigned control)
{
    static const enum nxr_rounding map[4] = {NXR_ROUND_NEAREST, NXR_ROUND_UP, NXR_ROUND_DOWN,
                                             NXR_ROUND_TOWARD_ZERO};
    return map[(control >> 22) & 3u];
}

static inline bool nxr__fpenv_default(unsigned control, unsigned x87)
{
    (void)x87;
    return control == 0;
}

#else

static inline bool nxr__fpenv_supported(void)
{
    return false;
}

static inline unsigned nxr__fpenv_read_control(void)
{
    return 0;
}

static inline void nxr__fpenv_write_control(unsigned control)
{
    (void)control;
}

static inline unsigned nxr__fpenv_read_x87(void)
{
    return 0;
}

static inline void nxr__fpenv_write_x87(unsigned control)
{
    (void)control;
}

static inline unsigned nxr__fpenv_ftz_bit(void)
{
    return 0;
}

static inline bool nxr__fpenv_ftz(unsigned control)
{
    (void)control;
    return false;
}

static inline bool nxr__fpenv_daz(unsigned control)
{
    (void)control;
    return false;
}

static inline enum nxr_rounding nxr__fpenv_rounding(unsigned control)
{
    (void)control;
    return NXR_ROUND_NEAREST;
}

static inline bool nxr__fpenv_default(unsigned control, unsigned x87)
{
    (void)control;
    (void)x87;
    return true;
}

#endif

#endif /* NXR_KERNELS_INTERNAL_FPENV_ARCH_H */
