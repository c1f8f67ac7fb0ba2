/* Does GCC 12's nvptx offloading see a global table made with "declare" and read in an
 * "acc routine seq"? routines_pendulum hung on an H100: its routines read lengths of 0.
 *   gcc -O2 -fopenacc -foffload=nvptx-none -DVARIANT=N declare_probe.c -lm && ./a.out
 * 1: static, declare create, filled by update device (the course's first solution)
 * 2: the same built with -O0 (the script does that)
 * 3: static with an initializer, declare copyin (the values are in the device image)
 * 4: declare create, filled by a compute region on the device
 * 5: not static, declare create, update device */
#include <math.h>
#include <stdio.h>

#ifndef VARIANT
#define VARIANT 1
#endif
#define NLEN 8

#if VARIANT == 3
static double length[NLEN] = {0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0};
#pragma acc declare copyin(length)
#elif VARIANT == 5
double length[NLEN];
#pragma acc declare create(length)
#else
static double length[NLEN];
#pragma acc declare create(length)
#endif

#pragma acc routine seq
static double get(int k) { return length[k]; }

int main(void)
{
    double out[NLEN] = {0};
#if VARIANT != 3
    for (int k = 0; k < NLEN; k++)
        length[k] = 0.25 * (k + 1);
#endif
#if VARIANT == 4
    #pragma acc parallel loop present(length)
    for (int k = 0; k < NLEN; k++)
        length[k] = 0.25 * (k + 1);
#elif VARIANT != 3
    #pragma acc update device(length)
#endif
    #pragma acc parallel loop copyout(out[0:NLEN])
    for (int k = 0; k < NLEN; k++)
        out[k] = get(k);
    printf("variant %d: device sees", VARIANT);
    for (int k = 0; k < NLEN; k++)
        printf(" %g", out[k]);
    printf("\n");
    return 0;
}
