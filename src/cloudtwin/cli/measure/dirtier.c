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
 *
 * Before "READY" it prints where the buffer sits in guest-physical memory, which decides
 * which of its pages QEMU's first pass (an upward scan of guest memory) reaches last:
 * "LAYOUT n p1 p2 ..." gives the mean page frame of each slice of n pages of the buffer,
 * in the order they are written, and "INUSE n u1 u2 ..." how many page frames of each
 * run of n frames are in use (not free in the kernel's buddy allocator), from
 * /proc/self/pagemap and /proc/kpageflags (the init runs as root; without them nothing
 * is printed). Writing starts at the buffer's first page the moment "READY" is printed.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define LAYOUT_SLICE 64UL   /* pages per slice of the buffer */
#define INUSE_RUN 256UL     /* page frames per count of frames in use */
#define KPF_BUDDY (1ULL << 10)
#define KPF_NOPAGE (1ULL << 20)
#define PFN_MASK ((1ULL << 55) - 1)

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

static void print_layout(volatile unsigned char *buffer, unsigned long pages) {
    int map = open("/proc/self/pagemap", O_RDONLY);
    int flags = open("/proc/kpageflags", O_RDONLY);
    if (map < 0 || flags < 0)
        goto done;
    printf("LAYOUT %lu", LAYOUT_SLICE);
    for (unsigned long first = 0; first < pages; first += LAYOUT_SLICE) {
        unsigned long sum = 0, count = 0;
        for (unsigned long page = first; page < first + LAYOUT_SLICE && page < pages; page++) {
            uint64_t entry;
            uintptr_t address = (uintptr_t)(buffer + page * PAGE);
            if (pread(map, &entry, sizeof entry, (off_t)(address / PAGE * sizeof entry)) != sizeof entry)
                break;
            sum += entry & PFN_MASK;
            count++;
        }
        printf(" %lu", count ? sum / count : 0UL);
    }
    printf("\nINUSE %lu", INUSE_RUN);
    uint64_t run[INUSE_RUN];
    for (off_t at = 0; pread(flags, run, sizeof run, at) == (ssize_t)sizeof run; at += sizeof run) {
        unsigned long in_use = 0;
        for (unsigned long frame = 0; frame < INUSE_RUN; frame++)
            in_use += !(run[frame] & (KPF_BUDDY | KPF_NOPAGE));
        printf(" %lu", in_use);
    }
    printf("\n");
done:
    if (map >= 0)
        close(map);
    if (flags >= 0)
        close(flags);
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
    print_layout(buffer, pages);
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
