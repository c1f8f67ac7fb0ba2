/* The tests' small OpenACC program: two compute regions, a copy out and a reduction; sum = 499500 */
#include <stdio.h>
int main(void) {
    double a[1000], s = 0.0;
    #pragma acc parallel loop copyout(a)
    for (int i = 0; i < 1000; i++) a[i] = i;
    #pragma acc parallel loop reduction(+:s) copyin(a)
    for (int i = 0; i < 1000; i++) s += a[i];
    printf("sum = %.0f\n", s);
    return 0;
}
