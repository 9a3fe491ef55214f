/*
 * isaprobe: which x86 vector extensions this process may really use, and the
 * cmake flags that build llama.cpp (ggml) for exactly those. The references
 * that tests and benchmarks compare against (make pydeps' llama-cpp-python,
 * make bench's llama.cpp) are built with these flags instead of
 * GGML_NATIVE: -march=native follows the CPU's flags, and a VM may list
 * features whose state the OS does not let a process use. AMX is the case
 * met: the CPU lists amx_tile, but tile data needs the kernel's permission
 * (arch_prctl ARCH_REQ_XCOMP_PERM), which VMs often refuse, and ggml's AMX
 * matmul then dies with SIGILL at its first tile instruction.
 *
 *   isaprobe            the usable features, one line ("avx2 fma f16c ...")
 *   isaprobe --cmake    -DGGML_NATIVE=OFF and one -DGGML_X=ON|OFF per feature
 *   isaprobe --why-amx  one line: whether AMX may be used here, and why not
 *
 * The vector features come from the compiler's __builtin_cpu_supports, which
 * also checks that the OS saves the registers' state (XCR0); F16C, BMI2 and
 * the AMX bits from cpuid. On a machine that is not x86, --cmake prints
 * only -DGGML_NATIVE=OFF (the compiler's defaults for the target).
 */
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023 /* linux/arch/x86/include/uapi/asm/prctl.h */
#define XFEATURE_XTILEDATA  18

static int cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit)
{
    unsigned r[4];
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]))
        return 0;
    return (r[reg] >> bit) & 1;
}

/* AMX: listed by cpuid (leaf 7: EDX 24 tile, 25 int8, 22 bf16), tile state
 * enabled in XCR0 (bits 17, 18) and the kernel grants this process the tile
 * data permission. Returns 1 when usable, else 0 with *why set. */
static int amx_usable(const char **why)
{
    if (!cpuid_bit(7, 0, 3, 24) || !cpuid_bit(7, 0, 3, 25)) {
        *why = "the CPU does not list amx_tile and amx_int8";
        return 0;
    }
    if (!cpuid_bit(1, 0, 2, 27)) { /* OSXSAVE: xgetbv allowed */
        *why = "the OS has not enabled XSAVE";
        return 0;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {
        *why = "the OS does not save the tile state (XCR0 bits 17-18 clear)";
        return 0;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        *why = "the kernel refused the tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return 0;
    }
    *why = "usable (listed, enabled in XCR0, permission granted)";
    return 1;
}

struct feat {
    const char *name;  /* as printed */
    const char *cmake; /* ggml's option */
    int on;
};

static int probe(struct feat *f, const char **amx_why)
{
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2");
    int fma = __builtin_cpu_supports("fma");
    int f16c = __builtin_cpu_supports("avx") && cpuid_bit(1, 0, 2, 29);
    int bmi2 = cpuid_bit(7, 0, 1, 8);
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512bw");
    int amx = amx_usable(amx_why);
    int n = 0;
    f[n++] = (struct feat){"avx", "GGML_AVX", __builtin_cpu_supports("avx")};
    f[n++] = (struct feat){"avx2", "GGML_AVX2", avx2};
    f[n++] = (struct feat){"fma", "GGML_FMA", fma};
    f[n++] = (struct feat){"f16c", "GGML_F16C", f16c};
    f[n++] = (struct feat){"bmi2", "GGML_BMI2", bmi2};
    f[n++] = (struct feat){"avx_vnni", "GGML_AVX_VNNI", avx2 && __builtin_cpu_supports("avxvnni")};
    f[n++] = (struct feat){"avx512", "GGML_AVX512", avx512};
    f[n++] = (struct feat){"avx512_vbmi", "GGML_AVX512_VBMI",
                           avx512 && __builtin_cpu_supports("avx512vbmi")};
    f[n++] = (struct feat){"avx512_vnni", "GGML_AVX512_VNNI",
                           avx512 && __builtin_cpu_supports("avx512vnni")};
    f[n++] = (struct feat){"avx512_bf16", "GGML_AVX512_BF16",
                           avx512 && __builtin_cpu_supports("avx512bf16")};
    f[n++] = (struct feat){"amx_tile", "GGML_AMX_TILE", avx512 && amx};
    f[n++] = (struct feat){"amx_int8", "GGML_AMX_INT8", avx512 && amx};
    f[n++] = (struct feat){"amx_bf16", "GGML_AMX_BF16", avx512 && amx && cpuid_bit(7, 0, 3, 22)};
    return n;
}
#endif

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (*mode && strcmp(mode, "--cmake") != 0 && strcmp(mode, "--why-amx") != 0) {
        fprintf(stderr, "usage: isaprobe [--cmake | --why-amx]\n");
        return 2;
    }
#if defined(__x86_64__)
    struct feat f[16];
    const char *why = "";
    int n = probe(f, &why);
    if (strcmp(mode, "--why-amx") == 0) {
        printf("amx: %s\n", why);
    } else if (strcmp(mode, "--cmake") == 0) {
        printf("-DGGML_NATIVE=OFF");
        for (int i = 0; i < n; i++)
            printf(" -D%s=%s", f[i].cmake, f[i].on ? "ON" : "OFF");
        printf("\n");
    } else {
        const char *sep = "";
        for (int i = 0; i < n; i++)
            if (f[i].on) {
                printf("%s%s", sep, f[i].name);
                sep = " ";
            }
        printf("\n");
    }
#else
    if (strcmp(mode, "--cmake") == 0)
        printf("-DGGML_NATIVE=OFF\n");
    else if (strcmp(mode, "--why-amx") == 0)
        printf("amx: not an x86-64 machine\n");
    else
        printf("\n");
#endif
    return ferror(stdout) || fflush(stdout) != 0 ? 3 : 0;
}
