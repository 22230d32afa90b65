/* dirtier: a guest program that keeps a chosen amount of memory busy.
 *
 * usage: dirtier BUFFER_MIB RATE_MIB_PER_S
 * Fills a buffer of BUFFER_MIB with non-zero bytes (so every page of it holds data),
 * prints "READY", then writes one byte into each 4 KiB page in turn, cycling over the
 * buffer, at RATE_MIB_PER_S worth of pages per second (0: stay idle). The set of pages
 * dirtied within a time t is therefore min(buffer, rate * t): a writable working set of
 * BUFFER_MIB dirtied at a constant rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096UL

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dirtier BUFFER_MIB RATE_MIB_PER_S\n");
        return 2;
    }
    unsigned long pages = strtoul(argv[1], NULL, 10) * (1UL << 20) / PAGE;
    double rate_pages = atof(argv[2]) * (1UL << 20) / PAGE;
    volatile unsigned char *buffer = malloc(pages * PAGE);
    if (pages == 0 || buffer == NULL) {
        fprintf(stderr, "dirtier: cannot allocate the buffer\n");
        return 1;
    }
    memset((void *)buffer, 0xA5, pages * PAGE);
    printf("READY pages=%lu\n", pages);
    fflush(stdout);
    if (rate_pages <= 0) {
        for (;;) {
            struct timespec idle = {1, 0};
            nanosleep(&idle, NULL);
        }
    }
    unsigned long next = 0, written = 0;
    unsigned char stamp = 1;
    double start = now_s();
    for (;;) {
        unsigned long due = (unsigned long)((now_s() - start) * rate_pages);
        while (written < due) {
            buffer[next * PAGE + (written % PAGE)] = stamp;
            written++;
            if (++next == pages) {
                next = 0;
                stamp = stamp == 255 ? 1 : stamp + 1;
            }
        }
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
}
