/*
 * runner_power: the energy columns (runner/analysis/power.c) from samples
 * whose answer is counted by hand, and the sampler's choice and RAPL
 * readings (runner/exec/energy.c) on a fake /sys/class/powercap tree,
 * wraparound included.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "test.h"
#include "testtmp.h"
#include "timeutil.h"
#include "xalloc.h"

#include "analysis/power.h"
#include "exec/energy.h"

/*
 * GPU 0: 100 W at 0 s and 1 s, 400 W at 4 s: trapezoids 100 J + 750 J over
 * 4 s = 212.5 W (the plain mean of the three readings would be 200).
 * GPU 1: one reading, 30 W. Sum 242.5 W over a 4 s span. Skipped: "[N/A]",
 * a stderr line, a line cut short; blank lines are not counted.
 */
static const char samples[] = "2026/12/02 08:00:00.000, 0, 100.00\n"
                              "2026/12/02 08:00:00.000, 1, 30.00\n"
                              "2026/12/02 08:00:00.500, 2, [N/A]\n"
                              "nvidia-smi: some warning\n"
                              "\n"
                              "2026/12/02 08:00:01.000, 0, 100.00\n"
                              "2026/12/02 08:00:04.000, 0, 400.00\n"
                              "2026/12/02 08:00:04.200, 0, 4";

TEST(time_weighted_mean_per_device_summed)
{
    double w, span;
    size_t skipped;
    /* the last line is cut: leave it out as a crash would have */
    size_t n = power_summarise(samples, strlen(samples) - strlen("2026/12/02 08:00:04.200, 0, 4"),
                               &w, &span, &skipped);
    CHECK_INT(n, 2);
    CHECK_NEAR(w, 242.5, 1e-9);
    CHECK_NEAR(span, 4, 1e-9);
    CHECK_INT(skipped, 2);
    /* a stamp that goes back adds no time and restarts the trapezoids */
    const char back[] = "2026/12/02 08:00:10.000, 0, 100\n"
                        "2026/12/02 08:00:12.000, 0, 100\n"
                        "2026/12/02 08:00:11.000, 0, 300\n"
                        "2026/12/02 08:00:12.000, 0, 300\n";
    n = power_summarise(back, strlen(back), &w, &span, &skipped);
    CHECK_INT(n, 1);
    CHECK_NEAR(w, (200 + 300) / 3.0, 1e-9);
    CHECK_NEAR(span, 3, 1e-9);
    /* across midnight and a month's end */
    const char night[] = "2026/11/30 23:59:59.500, 0, 10\n2026/12/01 00:00:00.500, 0, 30\n";
    power_summarise(night, strlen(night), &w, &span, &skipped);
    CHECK_NEAR(span, 1, 1e-9);
    CHECK_NEAR(w, 20, 1e-9);
    CHECK_INT(power_summarise("", 0, &w, &span, &skipped), 0);
}

TEST(point_columns_from_the_file_beside_the_log)
{
    char *log = test_tmp_path("c4-n8.log");
    char *pw = power_path(log);
    CHECK(strstr(pw, "/c4-n8.power.csv") != NULL);
    struct err err;
    err_init(&err);
    struct metric_set m;
    mset_init(&m);
    CHECK_INT(power_point(log, &m, &err), 0); /* no file: nothing, no error */
    CHECK(!mset_get(&m, "energy_j", NULL));
    size_t cut = strlen(samples) - strlen("2026/12/02 08:00:04.200, 0, 4");
    CHECK_INT(file_write_atomic(pw, samples, cut, &err, 3), 0);
    mset_set(&m, "duration_s", 10);
    mset_set(&m, "total_output_tokens", 100);
    CHECK_INT(power_point(log, &m, &err), 0);
    double v;
    CHECK(mset_get(&m, "mean_power_w", &v) && fabs(v - 242.5) < 1e-9);
    CHECK(mset_get(&m, "energy_j", &v) && fabs(v - 2425) < 1e-9);
    CHECK(mset_get(&m, "j_per_token", &v) && fabs(v - 24.25) < 1e-9);
    mset_release(&m);
    mset_init(&m); /* no duration_s: the samples' span; no tokens: no per token */
    CHECK_INT(power_point(log, &m, &err), 0);
    CHECK(mset_get(&m, "energy_j", &v) && fabs(v - 970) < 1e-9);
    CHECK(!mset_get(&m, "j_per_token", NULL));
    mset_release(&m);
    mset_init(&m);
    CHECK_INT(file_write_atomic(pw, "2026/12/02 08:00:00.000, 0, [N/A]\n", 34, &err, 3), 0);
    CHECK_INT(power_point(log, &m, &err), -1);
    CHECK(strstr(err.msg, "no power sample in 1 line(s)") != NULL);
    CHECK(!mset_get(&m, "energy_j", NULL));
    mset_release(&m);
    unlink(pw);
    free(pw);
    free(log);
}

static void put(const char *path, const char *text)
{
    struct err e;
    err_init(&e);
    CHECK_INT(file_write_atomic(path, text, strlen(text), &e, 3), 0);
}

TEST(source_choice)
{
    struct energy_src s;
    energy_choose(&s, "/usr/bin/nvidia-smi", "0,1", false, "/no/such/powercap");
    CHECK_INT(s.kind, ENERGY_NVSMI);
    CHECK_STR(s.gpus, "0,1");
    CHECK_STR(s.what, "nvidia-smi power.draw, GPUs 0,1, 5 Hz");
    energy_src_release(&s);
    energy_choose(&s, "/usr/bin/nvidia-smi", "", false, "/no/such/powercap");
    CHECK(s.gpus == NULL);
    CHECK_STR(s.what, "nvidia-smi power.draw, every GPU, 5 Hz");
    energy_src_release(&s);
    energy_choose(&s, "/usr/bin/nvidia-smi", "-1", false, "/no/such/powercap");
    CHECK_INT(s.kind, ENERGY_NONE);
    CHECK_MSG(strstr(s.what, "not measured: CUDA_VISIBLE_DEVICES hides every GPU, and no readable "
                             "RAPL counter (/no/such/powercap: ") == s.what,
              "%s", s.what);
    energy_src_release(&s);
    energy_choose(&s, NULL, NULL, false, "/no/such/powercap");
    CHECK(strstr(s.what, "not measured: no nvidia-smi on PATH") == s.what);
    energy_src_release(&s);
    energy_choose(&s, "/usr/bin/nvidia-smi", NULL, true, "/no/such/powercap");
    CHECK_INT(s.kind, ENERGY_NONE);
    CHECK_STR(s.what, "not measured: the server runs on another host (executor: ssh)");
    energy_src_release(&s);
}

TEST(rapl_readings_wrap_at_the_range)
{
    char *root = test_tmp_path("powercap");
    char *pkg = path_join(root, "intel-rapl:0"), *sub = path_join(root, "intel-rapl:0:0");
    char *other = path_join(root, "intel-rapl:1"); /* no energy_uj: not readable */
    CHECK_INT(mkdir(root, 0755), 0);
    CHECK_INT(mkdir(pkg, 0755), 0);
    CHECK_INT(mkdir(sub, 0755), 0);
    CHECK_INT(mkdir(other, 0755), 0);
    char *uj = path_join(pkg, "energy_uj"), *range = path_join(pkg, "max_energy_range_uj");
    char *sub_uj = path_join(sub, "energy_uj");
    put(uj, "262142328850\n"); /* 1 J below the range */
    put(range, "262143328850\n");
    put(sub_uj, "5\n");
    struct energy_src s;
    energy_choose(&s, NULL, NULL, false, root);
    CHECK_INT(s.kind, ENERGY_RAPL);
    CHECK_INT(s.rapl.n, 1); /* the package, not its sub-zone, not the unreadable one */
    CHECK_STR(s.what, "RAPL package energy (CPU), intel-rapl:0");
    char *out = test_tmp_path("c1-n1.power.csv");
    struct energy_run r;
    energy_run_init(&r);
    struct err err;
    err_init(&err);
    double t0 = clock_ms();
    CHECK_INT(energy_start(&s, &r, out, &err), 0);
    double t1 = clock_ms();
    r.every_ms = 100;
    sleep_ms(200, NULL);
    put(uj, "2000000\n"); /* wrapped: 1 J to the range, then 2 J */
    double t2 = clock_ms();
    energy_tick(&r);
    double t3 = clock_ms();
    r.every_ms = 60000; /* however slow this machine, the next tick is too soon */
    energy_tick(&r);    /* too soon: no reading */
    put(uj, "2500000\n");
    sleep_ms(5, NULL); /* a stretch the stop can time (it skips one under 1 ms) */
    energy_stop(&r);   /* the last stretch: 0.5 J */
    struct buf text;
    buf_init(&text, 1 << 16);
    CHECK_INT(file_read_all(out, &text, &err, 3), 0);
    char stamp[64];
    double w1 = -1, w2 = -1;
    int at = 0;
    CHECK(sscanf(text.data, "%63[^,], rapl:0, %lf\n%n", stamp, &w1, &at) == 2);
    CHECK(sscanf(text.data + at, "%63[^,], rapl:0, %lf", stamp, &w2) == 2);
    /* 3 J over the time between the start and the first reading */
    CHECK_MSG(w1 >= 0.999 * 3 / ((t3 - t0) / 1000) && w1 <= 1.001 * 3 / ((t2 - t1) / 1000),
              "w1 %g in [%g, %g]", w1, 3 / ((t3 - t0) / 1000), 3 / ((t2 - t1) / 1000));
    CHECK(w2 > 0);
    double mean, span;
    size_t skipped;
    CHECK_INT(power_summarise(text.data, text.len, &mean, &span, &skipped), 1);
    CHECK_INT(skipped, 0);
    buf_release(&text);
    energy_src_release(&s);
    unlink(out);
    unlink(uj);
    unlink(range);
    unlink(sub_uj);
    rmdir(sub);
    rmdir(pkg);
    rmdir(other);
    rmdir(root);
    free(out);
    free(uj);
    free(range);
    free(sub_uj);
    free(pkg);
    free(sub);
    free(other);
    free(root);
}

TEST_MAIN()
