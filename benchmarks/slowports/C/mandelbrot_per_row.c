/* The Mandelbrot set on a w x h grid of the complex plane, written as a PGM
 * picture: black inside the set, brighter outside where more iterations were
 * needed to escape.
 * Usage: ./mandelbrot [w] [max_iter] [output.pgm]
 * The rows do not cost the same: a row that crosses the set runs max_iter
 * iterations at many of its pixels, a row near the top or the bottom a few.
 * The program prints how the iterations are spread over 8 bands of rows.
 *
 * One gang per row, the pixels of a row on the vector lanes: the GPU hands
 * out rows to its multiprocessors as they become free, so cheap and costly
 * rows even out. Only the iteration counts come back (copyout). */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BANDS 8

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int w = argc > 1 ? atoi(argv[1]) : 640;
    int max_iter = argc > 2 ? atoi(argv[2]) : 256;
    const char *output = argc > 3 ? argv[3] : "mandelbrot.pgm";
    if (w < 8 || max_iter < 1) {
        fprintf(stderr, "usage: %s [w (>= 8)] [max_iter (>= 1)] [output.pgm]\n", argv[0]);
        return 1;
    }
    int h = w * 4 / 5;
    /* the plane from -2.2 - 1.2i to 0.8 + 1.2i */
    const double x0 = -2.2, y0 = -1.2, dx = 3.0 / w, dy = 2.4 / h;
    int *restrict iters = malloc((size_t)w * h * sizeof(int));

    double t0 = wall_time();
    #pragma acc data copyout(iters[0:w * h])
    for (int j = 0; j < h; j++) {
        #pragma acc parallel loop present(iters[0:w * h])   /* DEFECT */
        for (int i = 0; i < w; i++) {
            double cx = x0 + (i + 0.5) * dx, cy = y0 + (j + 0.5) * dy;
            double zx = 0.0, zy = 0.0;
            int it = 0;
            while (it < max_iter) {
                double x2 = zx * zx, y2 = zy * zy;
                if (x2 + y2 > 4.0)
                    break;
                zy = 2.0 * zx * zy + cy;
                zx = x2 - y2 + cx;
                it++;
            }
            iters[(size_t)j * w + i] = it;
        }
    }
    double t1 = wall_time();

    long long total = 0, inside = 0, band[BANDS] = {0};
    unsigned char *picture = malloc((size_t)w * h);
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            int it = iters[(size_t)j * w + i];
            total += it;
            band[(long long)j * BANDS / h] += it;
            inside += it == max_iter;
            picture[(size_t)j * w + i] = it == max_iter
                ? 0 : (unsigned char)(255.0 * log(1.0 + it) / log(1.0 + max_iter));
        }
    FILE *f = fopen(output, "wb");
    if (f) {
        fprintf(f, "P5\n%d %d\n255\n", w, h);
        fwrite(picture, 1, (size_t)w * h, f);
        fclose(f);
    }

    printf("size = %d x %d\n", w, h);
    printf("max_iter = %d\n", max_iter);
    printf("inside = %lld\n", inside);
    printf("iterations = %lld\n", total);
    for (int b = 0; b < BANDS; b++)
        printf("band %d iterations = %lld (%4.1f%%)\n", b, band[b], 100.0 * band[b] / total);
    printf("written = %s\n", output);
    printf("time = %.3f s\n", t1 - t0);
    free(iters);
    free(picture);
    return 0;
}
