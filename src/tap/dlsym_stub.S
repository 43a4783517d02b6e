/* dlsym(handle, name): ask vt_dlsym_target(handle, name, return address) where to go, then
 * jump there with the caller's arguments and return address intact. A C wrapper that called
 * glibc's dlsym would make every RTLD_NEXT lookup of every other interposer resolve relative
 * to vramtap instead of its caller. */
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
#if defined(__CET__)
    endbr64
#endif
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    movq 16(%rsp), %rdx
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call vt_dlsym_target
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlsym, .-dlsym
#elif defined(__aarch64__)
    .text
    .globl dlsym
    .type dlsym, %function
dlsym:
    .cfi_startproc
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    mov x2, x30
    bl vt_dlsym_target
    mov x16, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    br x16
    .cfi_endproc
    .size dlsym, .-dlsym
#else
#error "vramtap's dlsym stub supports x86-64 and AArch64"
#endif
    .section .note.GNU-stack,"",%progbits
