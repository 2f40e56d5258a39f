/* Times sched_yield: how many of N yields return within 2 us, 20 us, 100 us, 1 ms, or later.
   Every 100 yields it spins 50 us, as a searcher does between its looks.
   Build: gcc -O2 -o sched-yield-timing sched-yield-timing.c; run: ./sched-yield-timing 20000 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 20000;
    long buckets[5] = {0}, longest = 0;
    for (int i = 0; i < count; i++) {
        long start = now_ns();
        sched_yield();
        long took = now_ns() - start;
        if (took > longest) longest = took;
        buckets[took < 2000 ? 0 : took < 20000 ? 1 : took < 100000 ? 2 : took < 1000000 ? 3 : 4]++;
        if (i % 100 == 0) {
            long spin = now_ns();
            while (now_ns() - spin < 50000) { }
        }
    }
    printf("<2us %ld  <20us %ld  <100us %ld  <1ms %ld  >=1ms %ld  longest %ld us\n",
           buckets[0], buckets[1], buckets[2], buckets[3], buckets[4], longest / 1000);
    return 0;
}
