/* dirtier: a guest program that keeps a chosen amount of memory busy.
 *
 * usage: dirtier BUFFER_MIB RATE_MIB_PER_S
 * First writes zeros over the guest's free memory and gives it back (pages the kernel
 * freed after boot, e.g. the unpacked kernel image, still hold data; scrubbed, they are
 * zero pages again, so the guest's data is its used memory plus the buffer). Then fills
 * a buffer of BUFFER_MIB with non-zero bytes (so every page of it holds data), prints
 * "READY", then writes one byte into each 4 KiB page in turn, cycling over the
 * buffer, at RATE_MIB_PER_S worth of pages per second (0: stay idle). The set of pages
 * dirtied within a time t is therefore min(buffer, rate * t): a writable working set of
 * BUFFER_MIB dirtied at a constant rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096UL

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void scrub_free_memory(void) {
    FILE *info = fopen("/proc/meminfo", "r");
    unsigned long free_kib = 0;
    char line[128];
    while (info && fgets(line, sizeof line, info))
        if (sscanf(line, "MemFree: %lu kB", &free_kib) == 1)
            break;
    if (info)
        fclose(info);
    if (free_kib <= 16384)
        return;
    size_t size = (free_kib - 16384) * 1024UL;
    unsigned char *block = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return;
    for (size_t at = 0; at < size; at += PAGE)
        block[at] = 0;  /* the kernel hands out a zeroed page; writing makes it ours */
    munmap(block, size);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dirtier BUFFER_MIB RATE_MIB_PER_S\n");
        return 2;
    }
    unsigned long pages = strtoul(argv[1], NULL, 10) * (1UL << 20) / PAGE;
    double rate_pages = atof(argv[2]) * (1UL << 20) / PAGE;
    scrub_free_memory();
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
