/*
 * testtmp.h: a scratch folder for one unit-test binary. test_tmp_path(name)
 * returns "<folder>/<name>" (the caller frees it); the folder is made on
 * first use and removed, with the plain files in it, when the test exits.
 */
#ifndef TESTS_TESTTMP_H
#define TESTS_TESTTMP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"

static char test_tmpdir[64];

static void test_tmp_remove(void)
{
    DIR *d = opendir(test_tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = xasprintf("%s/%s", test_tmpdir, e->d_name);
        unlink(p);
        free(p);
    }
    if (d)
        closedir(d);
    rmdir(test_tmpdir);
}

static inline char *test_tmp_path(const char *name)
{
    if (!test_tmpdir[0]) {
        snprintf(test_tmpdir, sizeof(test_tmpdir), "/tmp/sweep-unit-XXXXXX");
        if (!mkdtemp(test_tmpdir))
            abort();
        atexit(test_tmp_remove);
    }
    return xasprintf("%s/%s", test_tmpdir, name);
}

#endif
