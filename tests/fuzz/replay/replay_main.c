/*
 * replay_main: runs a fuzz target without libFuzzer, for `make test`. Each
 * argument is a file or a folder of files (the corpus); every file is fed
 * as it is and then as 64 seeded mutations (bit flips, truncation, inserted
 * and duplicated bytes, two files spliced), so the replay explores a little
 * beyond the corpus yet is identical on every run. A crash or sanitizer
 * report fails the test; otherwise it prints "N passed, 0 failed".
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUTATIONS        64
#define REPLAY_MAX_INPUT (1u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned char *prev;
static size_t prev_len;

static void run_file(const char *path, int *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    unsigned char *data = malloc(REPLAY_MAX_INPUT); /* allow: test tool outside the xalloc build */
    unsigned char *mut = malloc(REPLAY_MAX_INPUT * 2 + 64); /* allow: test tool */
    size_t n = fread(data, 1, REPLAY_MAX_INPUT, f);
    fclose(f);
    LLVMFuzzerTestOneInput(data, n);
    for (int m = 0; m < MUTATIONS; m++) {
        size_t len = n;
        memcpy(mut, data, n);
        int edits = 1 + (int)(next() % 4);
        for (int e = 0; e < edits; e++) {
            switch (next() % 5) {
            case 0: /* flip a bit */
                if (len)
                    mut[next() % len] ^= (unsigned char)(1u << (next() % 8));
                break;
            case 1: /* truncate */
                if (len)
                    len = next() % len;
                break;
            case 2: /* insert a random byte */
                if (len < REPLAY_MAX_INPUT) {
                    size_t at = len ? next() % (len + 1) : 0;
                    memmove(mut + at + 1, mut + at, len - at);
                    mut[at] = (unsigned char)next();
                    len++;
                }
                break;
            case 3: /* overwrite with an interesting byte */
                if (len) {
                    static const unsigned char special[] = {0,    0xff, 0x7f, 0x80,
                                                            '\n', ':',  '"',  '{'};
                    mut[next() % len] = special[next() % sizeof(special)];
                }
                break;
            case 4: /* splice the previous file's tail */
                if (prev_len && len < REPLAY_MAX_INPUT) {
                    size_t take = next() % (prev_len + 1);
                    if (take > REPLAY_MAX_INPUT - len)
                        take = REPLAY_MAX_INPUT - len;
                    memcpy(mut + len, prev + prev_len - take, take);
                    len += take;
                }
                break;
            }
        }
        LLVMFuzzerTestOneInput(mut, len);
    }
    free(prev);
    prev = data;
    prev_len = n;
    free(mut);
    (*count)++;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            run_file(argv[i], &count);
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        char **names = NULL;
        size_t nn = 0;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            names = realloc(names, (nn + 1) * sizeof(*names)); /* allow: test tool */
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[nn] = malloc(len); /* allow: test tool */
            snprintf(names[nn], len, "%s/%s", argv[i], e->d_name);
            nn++;
        }
        if (d)
            closedir(d);
        qsort(names, nn, sizeof(*names), cmp);
        for (size_t k = 0; k < nn; k++) {
            run_file(names[k], &count);
            free(names[k]);
        }
        free(names);
    }
    if (count == 0) {
        fprintf(stderr, "replay: no corpus files given\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("%d passed, 0 failed\n", count);
    return 0;
}
