/* Blur a gray picture with a 3x3 binomial stencil, several passes.
 * Usage: ./blur [picture.pgm | n] [passes] [output.pgm]
 * The picture is a binary PGM (P5, 8-bit), or n: an n x n test card made by
 * the program. The edge pixels keep their value; the result is written to
 * blur.pgm (or the name given).
 *
 * A data region around the passes keeps img and tmp on the device: the
 * picture goes in once and comes back once, tmp never leaves the device.
 * Both compute constructs say with present() that the data is there. */
#define _POSIX_C_SOURCE 199309L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NMAX 4096

/* Fixed-size arrays: the compiler knows their extent (rows 0..h-1 and
 * columns 0..w-1 are used). */
static float img[NMAX][NMAX];
static float tmp[NMAX][NMAX];

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* the next number of a PGM header, skipping blanks and # comments */
static int header_number(FILE *f)
{
    int c = fgetc(f);
    while (c == '#' || isspace(c)) {
        if (c == '#')
            while (c != '\n' && c != EOF)
                c = fgetc(f);
        c = fgetc(f);
    }
    int v = 0, digits = 0;
    while (c != EOF && isdigit(c)) {
        v = 10 * v + (c - '0');
        digits++;
        c = fgetc(f);
    }
    return digits ? v : -1;   /* the one blank after the number is consumed */
}

static int read_pgm(const char *name, int *w, int *h)
{
    FILE *f = fopen(name, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", name);
        return 0;
    }
    int ok = fgetc(f) == 'P' && fgetc(f) == '5';
    *w = header_number(f);
    *h = header_number(f);
    int maxval = header_number(f);
    ok = ok && *w >= 3 && *h >= 3 && *w <= NMAX && *h <= NMAX && maxval == 255;
    for (int y = 0; ok && y < *h; y++)
        for (int x = 0; ok && x < *w; x++) {
            int c = fgetc(f);
            ok = c != EOF;
            img[y][x] = (float)c;
        }
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: not an 8-bit binary PGM of at most %d x %d pixels\n", name, NMAX, NMAX);
    return ok;
}

/* squares of 32 pixels, light and dark, with a mid-gray disc in the middle */
static void test_card(int n)
{
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            int dx = x - n / 2, dy = y - n / 2;
            if (4 * (dx * dx + dy * dy) < n * n / 4)
                img[y][x] = 128.0f;
            else
                img[y][x] = ((x / 32 + y / 32) % 2) ? 220.0f : 30.0f;
        }
}

static void write_pgm(const char *name, int w, int h)
{
    FILE *f = fopen(name, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", name);
        return;
    }
    fprintf(f, "P5\n%d %d\n255\n", w, h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float v = img[y][x] + 0.5f;
            fputc(v < 0.0f ? 0 : v > 255.0f ? 255 : (int)v, f);
        }
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *input = argc > 1 ? argv[1] : "256";
    int passes = argc > 2 ? atoi(argv[2]) : 10;
    const char *output = argc > 3 ? argv[3] : "blur.pgm";
    int w, h;
    if (isdigit((unsigned char)input[0])) {
        w = h = atoi(input);
        if (w < 3 || w > NMAX) {
            fprintf(stderr, "the size must be 3 to %d\n", NMAX);
            return 1;
        }
        test_card(w);
    } else if (!read_pgm(input, &w, &h)) {
        return 1;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            tmp[y][x] = img[y][x];   /* the edges of tmp stay those of img */

    double t0 = wall_time();
    #pragma acc data copy(img)
    for (int p = 0; p < passes; p++) {
        #pragma acc data create(tmp)   /* DEFECT */
        {
        #pragma acc parallel loop collapse(2) present(img, tmp)
        for (int y = 1; y < h - 1; y++)
            for (int x = 1; x < w - 1; x++)
                tmp[y][x] = (4.0f * img[y][x]
                             + 2.0f * (img[y - 1][x] + img[y + 1][x] + img[y][x - 1] + img[y][x + 1])
                             + img[y - 1][x - 1] + img[y - 1][x + 1]
                             + img[y + 1][x - 1] + img[y + 1][x + 1]) / 16.0f;

        #pragma acc parallel loop collapse(2) present(img, tmp)
        for (int y = 1; y < h - 1; y++)
            for (int x = 1; x < w - 1; x++)
                img[y][x] = tmp[y][x];
        }
    }
    double t1 = wall_time();

    double sum = 0.0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            sum += img[y][x];
    write_pgm(output, w, h);
    printf("size = %d x %d\n", w, h);
    printf("passes = %d\n", passes);
    printf("mean = %.6f\n", sum / ((double)w * h));
    printf("center = %.4f\n", img[h / 2][w / 2]);
    printf("pixel(%d,%d) = %.4f\n", w / 3, h / 5, img[h / 5][w / 3]);
    printf("written = %s\n", output);
    printf("time per pass = %9.3f ms\n", 1.0e3 * (t1 - t0) / (passes > 0 ? passes : 1));
    return 0;
}
