/* Conway's Game of Life on an n x n grid, surrounded by a frame of cells that
 * stay dead. A live cell with 2 or 3 live neighbours lives on, a dead cell
 * with exactly 3 comes to life, every other cell is dead at the next
 * generation.
 * Usage: ./life [n] [generations] [pictures]
 * The program writes life_0.pgm ... life_K.pgm (K = pictures): the top-left
 * corner of the grid (at most 256 x 256 cells) at generations 0, G/K, 2G/K,
 * ..., G, and prints the population at those generations.
 *
 * The two grids stay on the device for the whole run: a data region copies
 * both in once (their frames must be dead there too), the compute
 * constructs find them with present() whatever the pointer swap made of
 * cur and next, and `update self` brings back the current grid only when a
 * picture is written. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CORNER 256

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* about 30% of the cells alive, from a hash of their position: the same
 * start on every machine and in every order */
static int alive_at_start(int i, int j)
{
    unsigned h = (unsigned)i * 65536u + (unsigned)j;
    h = ((h >> 16) ^ h) * 0x45d9f3bu;
    h = ((h >> 16) ^ h) * 0x45d9f3bu;
    h = (h >> 16) ^ h;
    return h % 100 < 30;
}

static void write_picture(const unsigned char *grid, int n, int index)
{
    char name[32];
    int side = n < CORNER ? n : CORNER;
    snprintf(name, sizeof name, "life_%d.pgm", index);
    FILE *f = fopen(name, "wb");
    if (!f)
        return;
    fprintf(f, "P5\n%d %d\n1\n", side, side);
    for (int i = 1; i <= side; i++)
        fwrite(grid + (size_t)i * (n + 2) + 1, 1, side, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 256;
    int generations = argc > 2 ? atoi(argv[2]) : 100;
    int pictures = argc > 3 ? atoi(argv[3]) : 4;
    if (n < 3 || generations < 1 || pictures < 1 || pictures > 9) {
        fprintf(stderr, "usage: %s [n (>= 3)] [generations (>= 1)] [pictures (1-9)]\n", argv[0]);
        return 1;
    }
    const int stride = n + 2;
    const size_t cells = (size_t)stride * stride;
    unsigned char *a = calloc(cells, 1), *b = calloc(cells, 1);
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= n; j++)
            a[(size_t)i * stride + j] = (unsigned char)alive_at_start(i, j);
    unsigned char *cur = a, *next = b;
    int shown = 0;
    long population = 0;

    double t0 = wall_time();
    #pragma acc data copyin(a[0:cells], b[0:cells])
    for (int g = 0; g <= generations; g++) {
        if ((long)g * pictures >= (long)shown * generations) {
            /* a picture and the population every generations/pictures */
            population = 0;
            #pragma acc parallel loop collapse(2) reduction(+:population) present(cur[0:cells])
            for (int i = 1; i <= n; i++)
                for (int j = 1; j <= n; j++)
                    population += cur[(size_t)i * stride + j];
            #pragma acc update self(cur[0:cells])
            write_picture(cur, n, shown);
            printf("generation %d population = %ld\n", g, population);
            shown++;
        }
        if (g == generations)
            break;

        #pragma acc parallel loop collapse(2) present(cur[0:cells], next[0:cells])
        for (int j = 1; j <= n; j++)   /* DEFECT */
            for (int i = 1; i <= n; i++) {
                size_t c = (size_t)i * stride + j;
                int s = cur[c - stride - 1] + cur[c - stride] + cur[c - stride + 1]
                      + cur[c - 1] + cur[c + 1]
                      + cur[c + stride - 1] + cur[c + stride] + cur[c + stride + 1];
                next[c] = (unsigned char)(s == 3 || (s == 2 && cur[c]));
            }

        unsigned char *swap = cur;
        cur = next;
        next = swap;
    }
    double t1 = wall_time();

    printf("size = %d x %d\n", n, n);
    printf("generations = %d\n", generations);
    printf("population = %ld\n", population);
    printf("time per generation = %9.3f ms\n", 1.0e3 * (t1 - t0) / generations);
    free(a);
    free(b);
    return 0;
}
