/*
 * api_int: what api.c (requests: load, parse, /generate), api_fields.c (the
 * field tables and their readers) and api_resp.c (response bodies and SSE
 * events) share. Private to those files: everything else goes through
 * api.h.
 */
#ifndef ENGINE_API_INT_H
#define ENGINE_API_INT_H

#include <jansson.h>

#include "serve/api.h"

/* A 400 invalid_request_error naming param. Every refusal of the parser
 * goes through here or api_error_set, so the status, the OpenAI "type" and
 * the field name travel together to the HTTP layer (and into the log). */
#define BAD(e, param, ...) api_error_set((e), 400, "invalid_request_error", (param), __VA_ARGS__)

/* The JSON type of v as the messages say it ("got a string"). jansson
 * keeps integers and reals apart; both are "numbers" to a client, but an
 * integer field given 2.5 must say why it was refused, hence two names. */
static inline const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* The fields of root that the tables know (api_fields.c): a refused field
 * that does not hold its default is a 400 naming it; unknown ones are noted
 * in out->ignored; every field the endpoint reads is read into out. 0, or
 * -1 with e set. */
int api_read_fields(json_t *root, enum api_kind kind, const struct api_limits *lim,
                    struct api_request *out, struct api_error *e);
/* Note an unknown field in r->ignored ("a, b"; cut, with "...", when full). */
void api_note_ignored(struct api_request *r, const char *key);

#endif
