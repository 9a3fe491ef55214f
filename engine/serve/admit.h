/*
 * admit: a parsed request (api.h) admitted to the scheduler or refused.
 * The policy that decides it lives here, not in the HTTP glue: prompt text
 * too long for the context is refused before tokenizing; every prompt
 * (or the rendered chat) is tokenized and must leave room in the context;
 * an absent max_tokens is the rest of the context (128 for /generate, as
 * SGLang), a given one must fit; a non-streaming answer with logprobs
 * that cannot fit the body cap is refused up front (docs/reliability.md
 * W3-N3); a positive top_p below the smallest float keeps the likeliest
 * token only (W3-N1).
 */
#ifndef ENGINE_SERVE_ADMIT_H
#define ENGINE_SERVE_ADMIT_H

#include "serve/api.h"
#include "serve/scheduler.h"
#include "serve/server.h"

/*
 * Admit q for engine en: on 0, p holds everything the scheduler needs but
 * the connection's own fields (id, model, created, fd, wake...) and, when
 * q has no seed, the seed (the caller's per-request default); the prompts'
 * token ids in p are owned (api_admit_release). On -1, e says why (a 4xx
 * in OpenAI's shape, naming the field) and nothing is held.
 */
int api_admit(const struct srv_engine *en, const struct api_request *q, struct sched_req_params *p,
              struct api_error *e);

/* Free the token ids api_admit made (p->prompts). */
void api_admit_release(struct sched_req_params *p);

#endif
