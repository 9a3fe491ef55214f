/*
 * run_search: bench.find_max once a variant's grid is done. Each probe is
 * a rate point added to the plan and run through run_one() like any other
 * (an ok probe from an earlier session is reused); ratesearch.c decides the
 * next rate from whether a probe met the targets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xalloc.h"

#include "exec/ratesearch.h"
#include "exec/run_int.h"

/* The row of point pi in the table (any status), or NULL. */
static const struct res_point *row_of(const struct run_ctx *c, size_t pi)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const char *name = c->plan.variants[pp->variant].v->name;
    for (size_t r = c->table.n; r-- > 0;) {
        const struct res_point *row = &c->table.rows[r];
        if (row->key && strcmp(row->key, pp->key) == 0 && row->variant &&
            strcmp(row->variant, name) == 0)
            return row;
    }
    return NULL;
}

/*
 * bench.find_max of variant vi, once its grid is done, against the running
 * server: each probe is a rate point added to the plan, run and recorded
 * like any other (a probe with an ok row from an earlier session is reused,
 * so a resumed search repeats nothing), and meets the targets when ok with
 * slo_attainment >= bench.find_max.meet. Ends with one line naming
 * the highest rate that met them.
 */
void find_max(struct run_ctx *c, size_t vi)
{
    const struct exp_variant *v = c->plan.variants[vi].v;
    const struct exp_bench *b = &v->bench;
    struct rs_search s;
    struct err err;
    rs_init(&s, b->find_start, b->find_max_rate, (int)b->find_steps);
    size_t max_probes = (size_t)rs_max_probes(b->find_start, b->find_max_rate, (int)b->find_steps);
    for (size_t probe = 1; s.next > 0 && !stopping(c) && !c->fatal; probe++) {
        size_t pi;
        err_init(&err);
        if (plan_add_probe(&c->plan, vi, s.next, &pi, &err) != 0) {
            log_error("variant '%s': find_max: %s", v->name, err.msg);
            return;
        }
        c->attempted = xrealloc(c->attempted, (pi + 1) * sizeof(*c->attempted));
        c->took_s = xrealloc(c->took_s, (pi + 1) * sizeof(*c->took_s));
        c->attempted[pi] = false;
        c->took_s[pi] = -1;
        const struct plan_point *pp = &c->plan.points[pi];
        if (!point_done(c, pi)) {
            if (server_ensure(c, vi, &err) != 0) {
                log_error("variant '%s': find_max: %s", v->name, err.msg);
                c->env_failure = true;
                return;
            }
            char label[128];
            snprintf(label, sizeof(label), "%s find_max rate=%g n=%ld", v->name, pp->rate,
                     pp->prompts);
            prog_probe(&c->prog, probe, max_probes);
            if (!run_one(c, pi, label, false))
                return;
        }
        const struct res_point *row = row_of(c, pi);
        double att = -1;
        bool met = row && row->status && strcmp(row->status, RES_OK) == 0 &&
                   mset_get(&row->metrics, "slo_attainment", &att) && att >= b->find_attainment;
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: %g req/s %s the targets "
                  "(slo_attainment %.3g, want >= %g)",
                  v->name, s.next, met ? "meets" : "misses", att, b->find_attainment);
        rs_report(&s, met);
    }
    if (s.next > 0) /* interrupted */
        return;
    if (s.lo > 0 && s.hi == 0)
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: %g req/s, bench.find_max.max, meets the targets",
                  v->name, s.lo);
    else if (s.lo > 0)
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: the highest rate meeting the targets is %g "
                  "req/s (%g req/s missed them)",
                  v->name, s.lo, s.hi);
    else
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: no rate down to %g req/s met the targets",
                  v->name, s.hi);
}

/* Whether a variant from index `from` on has a bench.find_max search. */
bool search_ahead(const struct run_ctx *c, size_t from)
{
    for (size_t vi = from; vi < c->plan.n_variants; vi++)
        if (c->plan.variants[vi].v->bench.find_start > 0)
            return true;
    return false;
}
