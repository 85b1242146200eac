/* Preloaded by scripts/run-as-cpu: makes every program in the process answer `cpuid` as a CPU
 * of a lower class would, so that each one (ours, PyTorch, ONNX Runtime, oneDNN, gemm) picks the
 * kernels it would pick there, with no switch of its own.
 *
 * The kernel makes `cpuid` fault for this process (arch_prctl ARCH_SET_CPUID, on CPUs with CPUID
 * faulting); the handler below runs the real instruction, clears the bits of the features the
 * class lacks and steps over it. The setting survives fork and clone and is reset by exec, where
 * LD_PRELOAD brings this library back.
 *
 * Programs install SIGSEGV handlers of their own (compilers, runtimes catching stack overflows):
 * `sigaction` and `signal` are wrapped so that theirs is recorded rather than installed, and the
 * handler here passes every fault that is not `cpuid` on to it.
 *
 * CPUID_MASK_CLASS: "avx2" hides AVX-512 (every subset, BF16 and FP16 included), AVX-VNNI,
 * AVX-IFMA and AMX; "no-amx" hides AMX alone. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

/* Leaf 7: sub-leaf 0's EBX, ECX and EDX, and sub-leaf 1's EAX. */
static unsigned hide_ebx, hide_ecx, hide_edx, hide_sub1_eax;

/* The program's own SIGSEGV action, as it asked for it. */
static struct sigaction program_action;
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static long set_cpuid(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void pass_on(int signal_number, siginfo_t *info, void *context) {
    struct sigaction action = program_action;
    if (action.sa_flags & SA_RESETHAND) {
        memset(&program_action, 0, sizeof program_action);
        program_action.sa_handler = SIG_DFL;
    }
    if (action.sa_flags & SA_SIGINFO) {
        action.sa_sigaction(signal_number, info, context);
    } else if (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
        action.sa_handler(signal_number);
    } else {
        /* Fault again with the default action. */
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        real_sigaction(signal_number, &fallback, NULL);
    }
}

static void on_fault(int signal_number, siginfo_t *info, void *context) {
    greg_t *regs = ((ucontext_t *)context)->uc_mcontext.gregs;
    const unsigned char *at = (const unsigned char *)regs[REG_RIP];
    /* A fault on an unreadable instruction pointer is SEGV_MAPERR; cpuid's is SI_KERNEL. */
    if (info->si_code != SI_KERNEL || at[0] != 0x0f || at[1] != 0xa2) {
        pass_on(signal_number, info, context);
        return;
    }
    unsigned leaf = (unsigned)regs[REG_RAX], sub = (unsigned)regs[REG_RCX];
    unsigned a, b, c, d;
    set_cpuid(1);
    __cpuid_count(leaf, sub, a, b, c, d);
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        b &= ~hide_ebx;
        c &= ~hide_ecx;
        d &= ~hide_edx;
    } else if (leaf == 7 && sub == 1) {
        a &= ~hide_sub1_eax;
    }
    regs[REG_RAX] = a;
    regs[REG_RBX] = b;
    regs[REG_RCX] = c;
    regs[REG_RDX] = d;
    regs[REG_RIP] += 2;
}

int sigaction(int signal_number, const struct sigaction *action, struct sigaction *previous) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (signal_number != SIGSEGV) return real_sigaction(signal_number, action, previous);
    if (previous) *previous = program_action;
    if (action) program_action = *action;
    return 0;
}

sighandler_t signal(int signal_number, sighandler_t handler) {
    struct sigaction action, previous;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    if (sigaction(signal_number, &action, &previous) != 0) return SIG_ERR;
    return previous.sa_handler;
}

__attribute__((constructor)) static void mask_cpuid(void) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    program_action.sa_handler = SIG_DFL;
    const char *class = getenv("CPUID_MASK_CLASS");
    const unsigned amx_edx = BIT(22) | BIT(24) | BIT(25), amx_fp16 = BIT(21);
    if (class && strcmp(class, "avx2") == 0) {
        /* F, DQ, IFMA, PF, ER, CD, BW, VL */
        hide_ebx = BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31);
        /* VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        hide_ecx = BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14);
        /* 4VNNIW, 4FMAPS, VP2INTERSECT, FP16, and AMX */
        hide_edx = BIT(2) | BIT(3) | BIT(8) | BIT(23) | amx_edx;
        /* AVX-VNNI, AVX512_BF16, AMX-FP16, AVX-IFMA */
        hide_sub1_eax = BIT(4) | BIT(5) | amx_fp16 | BIT(23);
    } else if (class && strcmp(class, "no-amx") == 0) {
        hide_edx = amx_edx;
        hide_sub1_eax = amx_fp16;
    } else {
        fprintf(stderr, "cpuid-mask: CPUID_MASK_CLASS must be avx2 or no-amx\n");
        _exit(2);
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    /* On the alternate stack where the program set one up, as stack-overflow handlers need. */
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    real_sigaction(SIGSEGV, &action, NULL);
    if (set_cpuid(0) != 0) {
        perror("cpuid-mask: this CPU or kernel cannot make cpuid fault");
        _exit(2);
    }
}
