/*
 * runner_goodput: goodput, SLO attainment, requested lengths and the
 * achieved arrival rate from per-request records, against a fixture whose
 * answer was counted by hand (tests/fixtures/goodput/c4-n8.jsonl: two warmup
 * records, seven sent measured ones, one unsent; the comments there are in
 * this file, since JSONL has none):
 *   index 2 ok, TTFT 50 TPOT 10 E2E 500, 40 tokens      meets all
 *   index 3 TTFT 150                                    misses TTFT
 *   index 4 TPOT 25                                     misses TPOT
 *   index 5 E2E 1200 (ends at 1.5 s, the last end)      misses E2E
 *   index 6 TTFT 100 TPOT 20 E2E 1000, 30 tokens        meets all (targets inclusive)
 *   index 7 one token, TPOT null, 1 token               meets all
 *   index 8 failed (HTTP 503)                           sent, not met
 * with targets TTFT 100, TPOT 20, E2E 1000 ms: 3 of 7 met, 71 tokens;
 * sends at 0, 100, ... 600 ms: 6 gaps in 0.6 s = 10 req/s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"
#include "test.h"

#include "analysis/goodput.h"
#include "analysis/judge.h"

#define FIXTURE "tests/fixtures/goodput/c4-n8.jsonl"

static double get(const struct metric_set *ms, const char *name)
{
    double v = NAN;
    mset_get(ms, name, &v);
    return v;
}

TEST(hand_count)
{
    struct gp_slo slo = {100, 20, 1000};
    struct gp_count c;
    struct err err;
    err_init(&err);
    CHECK_MSG(gp_count_jsonl(FIXTURE, &slo, &c, &err) == 0, "%s", err.msg);
    CHECK_INT(c.n_sent, 7);
    CHECK_INT(c.n_ok, 6);
    CHECK_INT(c.n_met, 3);
    CHECK_INT(c.out_met, 71);
    CHECK_INT(c.req_input, 210);
    CHECK_INT(c.req_output, 384);
    CHECK_NEAR(c.end_s, 1.5, 1e-12);

    struct metric_set ms;
    mset_init(&ms);
    gp_metrics(&c, &slo, 10, &ms);
    CHECK_NEAR(get(&ms, "slo_attainment"), 3.0 / 7.0, 1e-12);
    CHECK_NEAR(get(&ms, "goodput_req_s"), 2.0, 1e-12);
    CHECK_NEAR(get(&ms, "goodput_tok_s"), 71 / 1.5, 1e-9);
    CHECK_NEAR(get(&ms, "offered_rate"), 10, 0);
    CHECK_NEAR(get(&ms, "achieved_rate"), 10, 1e-9);
    CHECK_NEAR(get(&ms, "requested_input_tokens"), 210, 0);
    CHECK_NEAR(get(&ms, "requested_output_tokens"), 384, 0);
    mset_release(&ms);

    /* the records' span is the denominator, not the block's rounded duration_s */
    mset_init(&ms);
    mset_set(&ms, "duration_s", 2.0);
    gp_metrics(&c, &slo, 0, &ms);
    CHECK_NEAR(get(&ms, "goodput_req_s"), 2.0, 1e-12);
    CHECK(!mset_get(&ms, "offered_rate", NULL)); /* closed loop: no rate columns */
    CHECK(!mset_get(&ms, "achieved_rate", NULL));
    mset_release(&ms);

    /* one target alone: only TTFT (index 3 misses) */
    struct gp_slo ttft = {100, 0, 0};
    CHECK(gp_count_jsonl(FIXTURE, &ttft, &c, &err) == 0);
    CHECK_INT(c.n_met, 5);
    /* no targets: no goodput columns, the requested lengths still */
    struct gp_slo none = {0, 0, 0};
    CHECK(gp_count_jsonl(FIXTURE, &none, &c, &err) == 0);
    mset_init(&ms);
    gp_metrics(&c, &none, 0, &ms);
    CHECK(!mset_get(&ms, "goodput_req_s", NULL) && !mset_get(&ms, "slo_attainment", NULL));
    CHECK(mset_get(&ms, "requested_output_tokens", NULL));
    mset_release(&ms);
}

TEST(point_files_and_errors)
{
    struct gp_slo slo = {100, 20, 1000};
    struct metric_set ms;
    struct err err;
    err_init(&err);
    mset_init(&ms);
    /* the records beside a log: X.log -> X.jsonl */
    CHECK(gp_point("tests/fixtures/goodput/c4-n8.log", &slo, 0, &ms, &err) == 0);
    CHECK_NEAR(get(&ms, "goodput_req_s"), 2.0, 1e-12);
    mset_release(&ms);
    /* none there (a command client): nothing added, no error */
    mset_init(&ms);
    CHECK(gp_point("tests/fixtures/goodput/c1-n1.log", &slo, 5, &ms, &err) == 0);
    CHECK_INT(ms.n, 0);
    mset_release(&ms);

    char dir[] = "/tmp/sweep-goodput-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/c1-n2.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"status\":\"ok\",\"warmup\":false,\"sent_ms\":0,\"e2e_ms\":1}\n{\"x\":1}\n", f);
    fclose(f);
    struct gp_count c;
    CHECK(gp_count_jsonl(path, &slo, &c, &err) != 0);
    CHECK_INT(err.code, RN_ERR_ENV);
    CHECK_MSG(strstr(err.msg, ":2: not a request record") != NULL, "%s", err.msg);
    f = fopen(path, "w");
    fputs("{\"status\":\"ok\"", f);
    fclose(f);
    err_init(&err);
    CHECK(gp_count_jsonl(path, &slo, &c, &err) != 0);
    CHECK_MSG(strstr(err.msg, ":1: ") != NULL, "%s", err.msg);
    unlink(path);
    rmdir(dir);
}

/* vLLM's detailed export (tests/fixtures/goodput/vllm-c4-n5.json), by hand:
 *   0  TTFT 50, 39 gaps of 10 ms: E2E 440, TPOT 10, 40 tokens   meets all
 *   1  TTFT 150                                                  misses TTFT
 *   2  gaps of 25 ms: TPOT 25                                    misses TPOT
 *   3  error "HTTP 503"                                          sent, failed
 *   4  TTFT 100, one token (no TPOT), E2E 100                    meets all
 * 2 of 5 met, 41 tokens, over "duration" 2 s. */
TEST(vllm_detailed_export)
{
    struct gp_slo slo = {100, 20, 1000};
    struct metric_set ms;
    struct err err;
    err_init(&err);
    mset_init(&ms);
    CHECK(gp_point("tests/fixtures/goodput/vllm-c4-n5.log", &slo, 0, &ms, &err) == 0);
    CHECK_NEAR(get(&ms, "slo_attainment"), 0.4, 1e-12);
    CHECK_NEAR(get(&ms, "goodput_req_s"), 1.0, 1e-12);
    CHECK_NEAR(get(&ms, "goodput_tok_s"), 20.5, 1e-12);
    CHECK(!mset_get(&ms, "requested_output_tokens", NULL)); /* not in the export */
    mset_release(&ms);
    /* without targets the export is not read at all */
    mset_init(&ms);
    struct gp_slo none = {0, 0, 0};
    CHECK(gp_point("tests/fixtures/goodput/vllm-c4-n5.log", &none, 0, &ms, &err) == 0);
    CHECK_INT(ms.n, 0);
    mset_release(&ms);
    /* a plain (not detailed) export has no per-request arrays: nothing counted */
    json_t *plain = json_load_file("tests/fixtures/logs/exports/vllm_save_result.json", 0, NULL);
    struct gp_count c;
    CHECK(plain && gp_count_vllm("x.json", plain, &slo, &c, &err) == 1);
    json_decref(plain);
    json_t *bad = json_loads("{\"ttfts\": [0.1, 0.2], \"output_lens\": [3]}", 0, NULL);
    CHECK(gp_count_vllm("x.json", bad, &slo, &c, &err) == -1);
    CHECK_MSG(strstr(err.msg, "x.json: per-request arrays of different lengths") != NULL, "%s",
              err.msg);
    json_decref(bad);
}

TEST_MAIN()
