/*
 * schedjob: exclusive work on the model between the scheduler's steps
 * (sched_submit_job in scheduler.h; /v1/embeddings is the user). A job is
 * queued under the scheduler's lock and run on the scheduler thread, with
 * a KV slot of its own, before the next step.
 */
#include <pthread.h>

#include "serve/sched_int.h"

int sched_submit_job(sched *s, struct sched_job *j, struct api_error *e)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        rc = api_error_set(e, 503, "unavailable_error", NULL, "the server is shutting down");
    } else {
        j->next = s->jobs;
        s->jobs = j;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The waiting jobs, each on a free slot (its prefix forgotten), while
 * no step runs; those that find no free slot wait for the next turn. */
void sched_run_jobs(sched *s)
{
    pthread_mutex_lock(&s->mu);
    struct sched_job *j = s->jobs;
    s->jobs = NULL;
    pthread_mutex_unlock(&s->mu);
    while (j) {
        struct sched_job *next = j->next;
        int slot = 0;
        while (slot < s->max_batch && s->slot_used[slot])
            slot++;
        if (slot == s->max_batch) { /* back to the list, to run when a slot frees */
            pthread_mutex_lock(&s->mu);
            j->next = s->jobs;
            s->jobs = j;
            pthread_mutex_unlock(&s->mu);
        } else {
            pfx_forget(&s->pfx, slot);
            model_slot_free(s->m, slot);
            j->run(s->m, slot, j->arg);
            model_slot_free(s->m, slot);
        }
        j = next;
    }
}

void sched_end_jobs(sched *s)
{
    for (struct sched_job *j = s->jobs, *next; j; j = next) {
        next = j->next;
        j->run(s->m, -1, j->arg);
    }
    s->jobs = NULL;
}
