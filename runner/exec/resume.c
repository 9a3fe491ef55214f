/*
 * resume: --resume's checks of a folder's keys and its saved extraction
 * overrides (see resume.h).
 */
#include "exec/resume.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "sweep.h"
#include "xalloc.h"

/* The folder's manifest.json, or NULL when it has none (or it does not
 * parse: resume_check refused that already). */
static json_t *load_manifest(const char *run_dir)
{
    char *path = path_join(run_dir, "manifest.json");
    json_t *root = path_exists(path) ? json_load_file(path, 0, NULL) : NULL;
    free(path);
    if (root && !json_is_object(root)) {
        json_decref(root);
        root = NULL;
    }
    return root;
}

/* The newest session's key_parts of variant name, or NULL. */
static json_t *recorded_parts(json_t *man, const char *name)
{
    json_t *sessions = json_object_get(man, "sessions");
    for (size_t s = json_array_size(sessions); s-- > 0;) {
        json_t *vs = json_object_get(json_array_get(sessions, s), "variants");
        size_t i;
        json_t *v;
        json_array_foreach(vs, i, v)
        {
            const char *n = json_string_value(json_object_get(v, "name"));
            json_t *kp = json_object_get(v, "key_parts");
            if (n && strcmp(n, name) == 0 && json_is_object(kp))
                return kp;
        }
    }
    return NULL;
}

static const char *part(json_t *kp, const char *field)
{
    const char *s = json_string_value(json_object_get(kp, field));
    return s ? s : "";
}

/* "EXISTS/SIZE/SHA" as "SIZE bytes, sha256 SHA16" (or "missing"). */
static void describe_model(const char *fp, char *out, size_t size)
{
    long long bytes = 0;
    const char *sha = strrchr(fp, '/');
    if (fp[0] != '1' || !sha || sscanf(fp + 2, "%lld", &bytes) != 1)
        snprintf(out, size, "missing");
    else
        snprintf(out, size, "%lld bytes, sha256 %.16s", bytes, sha + 1);
}

/* Why variant vi's keys no longer match, from its recorded key parts
 * against the plan's: one phrase into out. Returns true when a part
 * differs (false: nothing recorded tells, out says so). */
static bool name_cause(json_t *man, const struct plan *plan, size_t vi, char *out, size_t size)
{
    const struct plan_variant *pv = &plan->variants[vi];
    struct plan_key_parts now;
    struct err err;
    err_init(&err);
    json_t *was = recorded_parts(man, pv->v->name);
    if (!was || plan_key_parts(plan, vi, &now, &err) != 0) {
        snprintf(out, size,
                 "its manifest.json records no key parts to compare, so the model file, the "
                 "dataset file or an ${env:...} value changed");
        return false;
    }
    if (strcmp(part(was, "model"), now.model) != 0) {
        char then[96], cur[96];
        describe_model(part(was, "model"), then, sizeof(then));
        describe_model(now.model, cur, sizeof(cur));
        snprintf(out, size,
                 "the model file '%s' is not the one its points ran with (then: %s; now: %s)",
                 pv->model_path ? pv->model_path : "", then, cur);
    } else if (strcmp(part(was, "dataset"), now.dataset) != 0) {
        snprintf(out, size, "the dataset file '%s' changed (sha256 %.16s then, %.16s now)",
                 pv->v->bench.dataset_path ? pv->v->bench.dataset_path : "",
                 *part(was, "dataset") ? part(was, "dataset") : "none",
                 *now.dataset ? now.dataset : "none");
    } else if (strcmp(part(was, "server"), now.server) != 0) {
        snprintf(out, size,
                 "the server's argv or environment as expanded changed (an ${env:...} value "
                 "in server.command, flags, args or env)");
    } else if (strcmp(part(was, "client"), now.client) != 0) {
        snprintf(out, size,
                 "the client's argv as expanded changed (an ${env:...} value in bench.command)");
    } else {
        snprintf(out, size,
                 "its recorded key parts (model, dataset, server and client) are unchanged, so "
                 "the row's key did not come from this setup (points.csv edited?)");
        return false;
    }
    return true;
}

/* Whether variant vi's key parts are the ones the folder recorded. */
static bool same_parts(json_t *man, const struct plan *plan, size_t vi)
{
    struct plan_key_parts now;
    struct err err;
    err_init(&err);
    json_t *was = recorded_parts(man, plan->variants[vi].v->name);
    return was && plan_key_parts(plan, vi, &now, &err) == 0 &&
           strcmp(part(was, "model"), now.model) == 0 &&
           strcmp(part(was, "dataset"), now.dataset) == 0 &&
           strcmp(part(was, "server"), now.server) == 0 &&
           strcmp(part(was, "client"), now.client) == 0;
}

int resume_keys_check(const char *run_dir, const struct plan *plan, struct res_table *table,
                      struct err *err)
{
    json_t *man = load_manifest(run_dir);
    /* no manifest (a slurm task's seeded folder): the submitter checked */
    json_t *jr = json_object_get(man, "key_recipe");
    json_int_t recipe = !man ? -1 : json_is_integer(jr) ? json_integer_value(jr) : 1;
    size_t adopted = 0;
    int rc = 0;
    for (size_t pi = 0; pi < plan->n_points && rc == 0; pi++) {
        const struct plan_point *pp = &plan->points[pi];
        const struct plan_variant *pv = &plan->variants[pp->variant];
        struct res_point *row = (struct res_point *)res_table_find(
            table, pv->v->name, pp->concurrency, pp->prompts, pp->repeat);
        if (!row || !row->status || strcmp(row->status, RES_OK) != 0 ||
            (row->key && strcmp(row->key, pp->key) == 0))
            continue;
        char cause[512];
        if (man && recipe < PLAN_KEY_RECIPE && row->key && *row->key) {
            static const char *const why[] = PLAN_KEY_RECIPE_WHY;
            char whys[512] = "";
            for (json_int_t r = recipe + 1; r <= PLAN_KEY_RECIPE; r++)
                if (r >= 0 && (size_t)r < sizeof(why) / sizeof(why[0]) && why[r])
                    snprintf(whys + strlen(whys), sizeof(whys) - strlen(whys), "%s%s",
                             *whys ? "; " : "", why[r]);
            err_set(err, RN_ERR_USAGE,
                    "--resume '%s': its point keys were made by an older sweep (key recipe "
                    "%lld; this one makes recipe %d: %s), so its rows cannot be checked "
                    "against this setup; run into a new folder with --out (sweep plot, "
                    "compare and report still read the old folder)",
                    run_dir, (long long)recipe, PLAN_KEY_RECIPE, whys);
            rc = -1;
        } else if (row->key && *row->key) {
            name_cause(man, plan, pp->variant, cause, sizeof(cause));
            err_set(err, RN_ERR_USAGE,
                    "--resume '%s': variant '%s' c=%ld n=%ld: the folder's row has key %s, "
                    "the experiment now gives %s: %s; run into a new folder with --out",
                    run_dir, pv->v->name, pp->concurrency, pp->prompts, row->key, pp->key, cause);
            rc = -1;
        } else if (man && same_parts(man, plan, pp->variant)) {
            /* a row rebuilt from its log by sweep plot: same settings
             * (resume_check) and the same key parts, so the same key */
            free(row->key);
            row->key = xstrdup(pp->key);
            adopted++;
        } else {
            if (man)
                name_cause(man, plan, pp->variant, cause, sizeof(cause));
            else
                snprintf(cause, sizeof(cause), "it has no manifest.json to compare with");
            err_set(err, RN_ERR_USAGE,
                    "--resume '%s': variant '%s' c=%ld n=%ld: the folder's ok row has no key "
                    "(points.csv rebuilt from the logs by sweep plot?) and cannot be matched "
                    "to this setup: %s; run into a new folder with --out",
                    run_dir, pv->v->name, pp->concurrency, pp->prompts, cause);
            rc = -1;
        }
    }
    if (rc == 0 && adopted)
        log_info("resume: %zu ok row(s) without a key (rebuilt by sweep plot) took their point's "
                 "key: manifest.json records the same model, dataset and commands",
                 adopted);
    json_decref(man);
    return rc;
}

int resume_extractor(const char *run_dir, const struct exp_metrics *m, ext_set **out,
                     struct err *err)
{
    json_t *man = load_manifest(run_dir);
    json_t *rp = json_object_get(man, "replot");
    json_t *pats = json_object_get(rp, "patterns");
    const char *preset = json_string_value(json_object_get(rp, "preset"));
    size_t n = m->n_patterns, cap = m->n_patterns + json_object_size(pats) + 1;
    struct ext_pattern *user = xcalloc(cap, sizeof(*user));
    for (size_t i = 0; i < m->n_patterns; i++)
        user[i] = (struct ext_pattern){m->patterns[i].name, m->patterns[i].regex};
    const char *name;
    json_t *re;
    json_object_foreach(pats, name, re)
    {
        if (!json_is_string(re))
            continue;
        size_t i = 0;
        while (i < n && strcmp(user[i].name, name) != 0)
            i++;
        user[i] = (struct ext_pattern){name, json_string_value(re)};
        if (i == n)
            n++;
    }
    int rc = ext_new(preset ? preset : m->preset, user, n, out, err);
    if (rc != 0)
        err_prefix(err, "%s",
                   preset || json_object_size(pats)
                       ? "the extraction overrides sweep plot saved in manifest.json"
                       : "metrics");
    free(user);
    json_decref(man);
    return rc;
}

size_t resume_adopt_renamed(const struct plan *plan, const struct experiment *exp,
                            struct res_table *t)
{
    size_t n = 0;
    for (size_t pi = 0; pi < plan->n_points; pi++) {
        const struct plan_point *pp = &plan->points[pi];
        const char *name = plan->variants[pp->variant].v->name;
        if (plan_point_done(plan, t, pi))
            continue;
        for (size_t r = 0; r < t->n; r++) {
            struct res_point *row = &t->rows[r];
            if (!row->key || strcmp(row->key, pp->key) != 0 || !row->status ||
                strcmp(row->status, RES_OK) != 0 || !row->variant ||
                exp_find_variant(exp, row->variant) ||
                res_table_find(t, name, row->concurrency, row->prompts, row->repeat))
                continue;
            free(row->variant);
            row->variant = xstrdup(name);
            n++;
            break;
        }
    }
    return n;
}
