/*
 * report_json: fit.json (per variant: the fit with its intervals, the
 * throughput law, the other step fit, the spread of repeats) and fit.csv
 * (one flat row per variant, the same rows as fit.json's "table").
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "timeutil.h"
#include "version.h"

#include "analysis/report_int.h"

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jci(const struct fit_ci *ci)
{
    if (!ci->ok)
        return json_null();
    json_t *a = json_array();
    json_array_append_new(a, jnum(ci->lo));
    json_array_append_new(a, jnum(ci->hi));
    return a;
}

/* {"source": where the power came from or why not (manifest.json), "levels":
 * [{concurrency, mean_power_w, energy_j, j_per_token}: means over the ok
 * repeats]} (analysis/power.h), or NULL when neither is known. */
static json_t *energy_json(const struct report *r, const char *variant)
{
    static const char *const cols[] = {"mean_power_w", "energy_j", "j_per_token"};
    const char *source = NULL;
    for (size_t i = 0; i < r->rd.n_v; i++)
        if (strcmp(r->rd.v[i].name, variant) == 0)
            source = r->rd.v[i].energy;
    json_t *levels = json_array();
    struct sum_series s[3];
    for (size_t c = 0; c < 3; c++)
        sum_metric(&r->t, variant, cols[c], &s[c]);
    for (size_t l = 0; l < s[1].n; l++) { /* the levels with an energy_j */
        json_t *o = json_object();
        json_object_set_new(o, "concurrency", json_integer(s[1].lv[l].concurrency));
        for (size_t c = 0; c < 3; c++) {
            const struct sum_level *lv = sum_find(&s[c], s[1].lv[l].concurrency);
            json_object_set_new(o, cols[c], jnum(lv ? lv->s.mean : NAN));
        }
        json_array_append_new(levels, o);
    }
    for (size_t c = 0; c < 3; c++)
        sum_series_release(&s[c]);
    if (!source && !json_array_size(levels)) {
        json_decref(levels);
        return NULL;
    }
    return json_pack("{s:s?, s:o}", "source", source, "levels", levels);
}

/* The spread of every metric at every concurrency with repeats, or NULL. */
static json_t *spread_json(const struct res_table *t, const char *variant)
{
    json_t *out = json_object();
    bool any = false;
    struct strvec names = STRVEC_INIT;
    for (size_t r = 0; r < t->n; r++)
        for (size_t k = 0; k < t->rows[r].metrics.n; k++)
            if (strvec_find(&names, t->rows[r].metrics.m[k].name) < 0)
                strvec_push(&names, t->rows[r].metrics.m[k].name);
    for (size_t i = 0; i < names.n; i++) {
        struct sum_series s;
        sum_metric(t, variant, names.v[i], &s);
        json_t *levels = json_array();
        for (size_t l = 0; l < s.n; l++) {
            const struct sum_level *lv = &s.lv[l];
            if (lv->s.n < 2)
                continue;
            json_t *o = json_object();
            json_object_set_new(o, "concurrency", json_integer(lv->concurrency));
            json_object_set_new(o, "n", json_integer((json_int_t)lv->s.n));
            json_object_set_new(o, "mean", jnum(lv->s.mean));
            json_object_set_new(o, "sd", jnum(lv->s.sd));
            json_object_set_new(o, "min", jnum(lv->s.min));
            json_object_set_new(o, "max", jnum(lv->s.max));
            json_object_set_new(o, "mean_ci95", jci(&lv->s.mean_ci));
            json_array_append_new(levels, o);
        }
        if (json_array_size(levels)) {
            json_object_set_new(out, names.v[i], levels);
            any = true;
        } else {
            json_decref(levels);
        }
        sum_series_release(&s);
    }
    strvec_release(&names);
    if (!any) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *variant_json(const struct report *r, size_t vi)
{
    const struct fit_analysis *fa = &r->fits[vi];
    const char *variant = r->variants.v[vi];
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(fa->ok));
    json_object_set_new(o, "points_ok", json_integer((json_int_t)sum_count(&r->t, variant, true)));
    json_object_set_new(o, "points_failed",
                        json_integer((json_int_t)sum_count(&r->t, variant, false)));
    json_object_set_new(o, "n_points", json_integer((json_int_t)fa->line.n));
    json_object_set_new(o, "n_levels", json_integer((json_int_t)fa->n_x));
    if (fa->reason[0])
        json_object_set_new(o, "note", json_string(fa->reason));
    if (fa->unfit)
        json_object_set_new(o, "unfit", json_string(fa->unfit_why));
    const struct sum_thr *th = &r->thr[vi];
    if (th->ok)
        json_object_set_new(o, "throughput_law",
                            json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "model",
                                      "N*out*1000/(e2e_a + e2e_b*N)", "e2e_a_ms", jnum(th->e2e.a),
                                      "e2e_b_ms", jnum(th->e2e.b), "out_tokens",
                                      jnum(th->out_tokens), "max_rel_error", jnum(th->max_rel),
                                      "e2e_source", th->source));
    if (r->alt_y && r->alt[vi].ok)
        json_object_set_new(
            o, strcmp(r->alt_y, "server_step_ms") == 0 ? "server_fit" : "client_fit",
            json_pack("{s:s, s:s, s:o, s:o, s:o, s:b}", "x", r->alt_x, "y", r->alt_y, "a",
                      jnum(r->alt[vi].line.a), "b", jnum(r->alt[vi].line.b), "r2",
                      jnum(r->alt[vi].line.r2), "unfit", r->alt[vi].unfit));
    if (fa->ok) {
        json_object_set_new(o, "a", jnum(fa->line.a));
        json_object_set_new(o, "b", jnum(fa->line.b));
        json_object_set_new(o, "r2", jnum(fa->line.r2));
        json_object_set_new(o, "ceiling_tok_s", jnum(fa->ceiling));
        json_object_set_new(o, "c90", jnum(fa->c90));
        json_object_set_new(o, "a_ci95", jci(&fa->a_ci));
        json_object_set_new(o, "b_ci95", jci(&fa->b_ci));
        json_object_set_new(o, "ceiling_ci95", jci(&fa->ceiling_ci));
        json_t *res = json_array(), *regime = json_array();
        for (size_t i = 0; i < fa->n_res; i++) {
            const struct fit_residual *x = &fa->res[i];
            json_t *e = json_object();
            json_object_set_new(e, r->fit_x, jnum(x->x));
            json_object_set_new(e, "repeat", json_integer(x->repeat));
            json_object_set_new(e, r->fit_y, jnum(x->y));
            json_object_set_new(e, "fitted", jnum(x->fitted));
            json_object_set_new(e, "residual", jnum(x->residual));
            json_object_set_new(e, "relative", jnum(x->relative));
            json_object_set_new(e, "regime_change", json_boolean(x->regime_change));
            json_array_append_new(res, e);
            if (x->regime_change)
                json_array_append_new(regime, jnum(x->x));
        }
        json_object_set_new(o, "residuals", res);
        json_object_set_new(o, "regime_changes", regime);
        json_t *pred = json_array();
        for (size_t i = 0; i < fa->n_pred; i++) {
            json_t *e = json_object();
            json_object_set_new(e, r->fit_x, jnum(fa->pred[i].x));
            json_object_set_new(e, r->fit_y, jnum(fa->pred[i].y));
            if (isfinite(fa->pred[i].throughput))
                json_object_set_new(e, "output_throughput", jnum(fa->pred[i].throughput));
            json_array_append_new(pred, e);
        }
        json_object_set_new(o, "predictions", pred);
    }
    json_t *spread = spread_json(&r->t, variant);
    if (spread)
        json_object_set_new(o, "spread", spread);
    json_t *energy = energy_json(r, variant);
    if (energy)
        json_object_set_new(o, "energy", energy);
    return o;
}

static json_t *flat_row(const struct report *r, size_t vi);

int report_write_fit_json(const struct report *r, struct err *err)
{
    json_t *root = json_object();
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_object_set_new(root, "sweep_version", json_string(BUILD_VERSION));
    json_object_set_new(root, "written", json_string(stamp));
    json_object_set_new(root, "run", json_string(r->rd.name));
    json_object_set_new(root, "model", json_string("y = a + b*x (least squares)"));
    json_object_set_new(root, "x", json_string(r->fit_x));
    json_object_set_new(root, "y", json_string(r->fit_y));
    json_object_set_new(root, "regime_threshold", json_real(FIT_REGIME_REL));
    json_object_set_new(root, "bootstrap",
                        json_pack("{s:i, s:i, s:s}", "replicates", FIT_BOOTSTRAP_N, "seed",
                                  (int)FIT_SEED_DEFAULT, "level", "95% percentile"));
    json_t *vs = json_object();
    for (size_t i = 0; i < r->variants.n; i++)
        json_object_set_new(vs, r->variants.v[i], variant_json(r, i));
    json_object_set_new(root, "variants", vs);
    /* the same as flat rows (fit.csv): pandas.json_normalize(fit["table"]) */
    json_t *table = json_array();
    for (size_t i = 0; i < r->variants.n; i++)
        json_array_append_new(table, flat_row(r, i));
    json_object_set_new(root, "table", table);
    char *path = path_join(r->dir, "fit.json");
    int rc = rundir_write_json(path, root, JSON_REAL_PRECISION(10), err);
    json_decref(root);
    free(path);
    return rc;
}

/* One variant's fit as a flat object (keys in column order): a row of
 * fit.csv and of fit.json's "table". null = not known. */
static json_t *flat_row(const struct report *r, size_t vi)
{
    const struct fit_analysis *fa = &r->fits[vi], *alt = r->alt_y ? &r->alt[vi] : NULL;
    const struct sum_thr *th = &r->thr[vi];
    bool ok = fa->ok;
    json_t *o = json_object();
    json_object_set_new(o, "variant", json_string(r->variants.v[vi]));
    json_object_set_new(o, "x", json_string(r->fit_x));
    json_object_set_new(o, "y", json_string(r->fit_y));
    json_object_set_new(o, "ok", json_boolean(fa->ok && !fa->unfit));
    json_object_set_new(o, "points", json_integer((json_int_t)fa->line.n));
    json_object_set_new(o, "levels", json_integer((json_int_t)fa->n_x));
    json_object_set_new(o, "a", jnum(ok ? fa->line.a : NAN));
    json_object_set_new(o, "b", jnum(ok ? fa->line.b : NAN));
    json_object_set_new(o, "r2", jnum(ok ? fa->line.r2 : NAN));
    json_object_set_new(o, "ceiling_tok_s", jnum(fa->ceiling));
    json_object_set_new(o, "c90", jnum(fa->c90));
    const struct fit_ci *cis[] = {&fa->a_ci, &fa->b_ci, &fa->ceiling_ci};
    static const char *const ci_names[][2] = {{"a_ci95_lo", "a_ci95_hi"},
                                              {"b_ci95_lo", "b_ci95_hi"},
                                              {"ceiling_ci95_lo", "ceiling_ci95_hi"}};
    for (size_t k = 0; k < 3; k++) {
        json_object_set_new(o, ci_names[k][0], jnum(cis[k]->ok ? cis[k]->lo : NAN));
        json_object_set_new(o, ci_names[k][1], jnum(cis[k]->ok ? cis[k]->hi : NAN));
    }
    json_object_set_new(o, "e2e_a_ms", jnum(th->ok ? th->e2e.a : NAN));
    json_object_set_new(o, "e2e_b_ms", jnum(th->ok ? th->e2e.b : NAN));
    json_object_set_new(o, "out_tokens", jnum(th->ok ? th->out_tokens : NAN));
    json_object_set_new(o, "throughput_max_rel_error", jnum(th->ok ? th->max_rel : NAN));
    json_object_set_new(o, "alt_x", json_string(alt ? r->alt_x : ""));
    json_object_set_new(o, "alt_y", json_string(alt ? r->alt_y : ""));
    json_object_set_new(o, "alt_a", jnum(alt && alt->ok ? alt->line.a : NAN));
    json_object_set_new(o, "alt_b", jnum(alt && alt->ok ? alt->line.b : NAN));
    json_object_set_new(o, "alt_r2", jnum(alt && alt->ok ? alt->line.r2 : NAN));
    json_object_set_new(o, "note", json_string(fa->unfit ? fa->unfit_why : fa->reason));
    return o;
}

/* fit.csv: the flat rows of fit.json's "table", for pandas.read_csv and
 * spreadsheets. Empty cell = not known. */
int report_write_fit_csv(const struct report *r, struct err *err)
{
    struct buf b;
    buf_init(&b, REPORT_MAX);
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        json_t *row = flat_row(r, vi), *v;
        const char *key;
        bool first = true;
        if (vi == 0) { /* the header: the same keys */
            json_object_foreach(row, key, v)
            {
                buf_puts(&b, first ? "" : ",");
                res_csv_cell(&b, key);
                first = false;
            }
            buf_putc(&b, '\n');
            first = true;
        }
        json_object_foreach(row, key, v)
        {
            buf_puts(&b, first ? "" : ",");
            first = false;
            if (json_is_string(v))
                res_csv_cell(&b, json_string_value(v));
            else if (json_is_integer(v))
                buf_printf(&b, "%lld", (long long)json_integer_value(v));
            else if (json_is_real(v))
                buf_json_num(&b, json_real_value(v));
            else if (json_is_boolean(v))
                buf_puts(&b, json_is_true(v) ? "true" : "false");
        }
        buf_putc(&b, '\n');
        json_decref(row);
    }
    char *path = path_join(r->dir, "fit.csv");
    int rc = file_write_atomic(path, b.data ? b.data : "", b.len, err, RN_ERR_ENV);
    free(path);
    buf_release(&b);
    return rc;
}
