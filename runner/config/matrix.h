/*
 * matrix: expanding `matrix: {flags.max-batch: [8, 16], ...}` into variant
 * overrides and names (config/experiment.c checks the map and decodes the
 * overrides). Private to config/.
 */
#ifndef RUNNER_MATRIX_H
#define RUNNER_MATRIX_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#include "config/schema.h"
#include "config/ytree.h"

/* The schema key a matrix key names, with its full path ("flags.x" ->
 * "server.flags.x") in out; NULL when it names no setting a variant may
 * change. A path below a map of flags, env or patterns names one entry. */
const struct schema_key *mx_target(const char *key, char *out, size_t size);

/* The index of an earlier key of matrix m (keys counted from 0) that names
 * the same setting as key i ("flags.x" and "server.flags.x"), or -1. Keys
 * 0..i must have passed mx_target. */
int mx_same_target(const struct ynode *m, size_t i);

/* A value fit for a variant name: 1 to 32 of [A-Za-z0-9._-], a scalar. */
bool mx_value_ok(const struct ynode *v);

/*
 * The override of one variant under combination `combo` (0-based, the last
 * key varying fastest) of matrix m: an owned copy of over (NULL: none) with
 * each key's value set at its path, maps made as needed; the combination's
 * name ("max-batch=8,quant=mxfp4") is appended to name. Free the result
 * with ytree_free. m must have passed the loader's checks.
 */
struct ynode *mx_combo(const struct ynode *m, size_t combo, const struct ynode *over,
                       struct buf *name);

#endif
