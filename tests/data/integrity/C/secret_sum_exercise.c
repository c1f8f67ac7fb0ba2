/* The weighted sum of i*i mod 7 for i < n: make it run on the accelerator. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    double sum = 0.0;
    double *w = malloc(13 * sizeof(double));
    for (int k = 0; k < 13; k++)
        w[k] = 1.0 / (1.0 + k);
    for (long i = 0; i < n; i++)
        sum += (double)((i * i) % 7) * w[i % 13];
    printf("sum = %.12e\n", sum);
    free(w);
    return 0;
}
