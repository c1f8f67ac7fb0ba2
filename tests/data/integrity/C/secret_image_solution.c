/* A small picture whose pixels depend on the arguments, written as picture.pgm, on the
 * accelerator: what the integrity tests compare with the `image` check. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int seed = argc > 1 ? atoi(argv[1]) : 7;
    enum { W = 16, H = 12 };
    int *img = malloc(W * H * sizeof(int));
    #pragma acc parallel loop copyout(img[0:W*H])
    for (int i = 0; i < W * H; i++)
        img[i] = (i * seed + i / W) % 256;
    FILE *f = fopen("picture.pgm", "w");
    if (!f)
        return 1;
    fprintf(f, "P2\n%d %d\n255\n", W, H);
    for (int i = 0; i < W * H; i++)
        fprintf(f, "%d%c", img[i], (i + 1) % W ? ' ' : '\n');
    fclose(f);
    printf("picture written for seed %d\n", seed);
    free(img);
    return 0;
}
