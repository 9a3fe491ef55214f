/*
 * cpu/isa: which SIMD tables this process may use, beyond what the CPU has.
 * The tables are chosen by the compiler's __builtin_cpu_supports, which also
 * checks that the OS saves the registers (XCR0): a VM that lists AVX-512 but
 * does not enable its state gets the AVX2 table, never a SIGILL. No kernel
 * here uses AMX; one that does must first ask the kernel for the tile data
 * permission (arch_prctl ARCH_REQ_XCOMP_PERM) and fall back when refused.
 *
 * FP4SERVE_ISA_DISABLE=avx512[,avx2] withholds tables as if the CPU lacked
 * them (avx2 withholds avx512 too): to compare tables on one machine, and
 * so that tests reach the refusal path of --isa on any CPU.
 */
#ifndef ENGINE_CPU_ISA_H
#define ENGINE_CPU_ISA_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Is the table NAME ("avx2", "avx512") withheld by FP4SERVE_ISA_DISABLE? */
static inline bool isa_withheld(const char *name)
{
    const char *list = getenv("FP4SERVE_ISA_DISABLE");
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if ((len == n && memcmp(p, name, n) == 0) ||
            (len == 4 && memcmp(p, "avx2", 4) == 0 && strcmp(name, "avx512") == 0))
            return true;
        p = end ? end + 1 : p + len;
    }
    return false;
}

#endif
