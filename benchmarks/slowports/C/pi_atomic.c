/* pi as the integral of 4/(1+x*x) over [0, 1], midpoint rule with n intervals.
 * Usage: ./pi [n]
 * The loop runs on the accelerator; reduction(+:sum) gives every gang,
 * worker and vector lane its own partial sum and adds them all at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = (argc > 1) ? atol(argv[1]) : 10000000L;
    if (n < 1) {
        fprintf(stderr, "n must be positive\n");
        return 1;
    }
    const double pi_ref = 3.141592653589793;
    const double h = 1.0 / (double)n;
    double sum = 0.0;

    /* x is declared inside the loop body: each iteration has its own */
    #pragma acc parallel loop copy(sum)
    for (long i = 0; i < n; i++) {
        double x = ((double)i + 0.5) * h;
        #pragma acc atomic update   /* DEFECT */
        sum += 4.0 / (1.0 + x * x);
    }
    double pi = sum * h;

    printf("n = %ld\n", n);
    printf("pi = %.12f\n", pi);
    printf("error = %.3E\n", fabs(pi - pi_ref));
    return 0;
}
