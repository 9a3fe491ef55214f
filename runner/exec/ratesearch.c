/*
 * ratesearch: doubling, then bisection (ratesearch.h).
 */
#include "exec/ratesearch.h"

void rs_init(struct rs_search *s, double start, double max, int steps)
{
    *s = (struct rs_search){.start = start, .max = max, .steps = steps, .next = start};
}

void rs_report(struct rs_search *s, bool met)
{
    double r = s->next;
    if (met)
        s->lo = r;
    else
        s->hi = r;
    if (s->hi == 0) { /* doubling while every probe met: max is probed once, exactly */
        s->next = r >= s->max ? 0 : (2 * r < s->max ? 2 * r : s->max);
        return;
    }
    /* bisection between lo (0 when even start missed) and hi; `bisected`
     * counts the bisection probes scheduled so far */
    if (s->bisected >= s->steps) {
        s->next = 0;
        return;
    }
    s->bisected++;
    s->next = (s->lo + s->hi) / 2;
}

double rs_step(const struct rs_search *s)
{
    return s->next == 0 && s->hi > 0 ? s->hi - s->lo : 0;
}

int rs_max_probes(double start, double max, int steps)
{
    if (!(start > 0) || !(max >= start) || steps < 0)
        return 0;
    /* the doubling rs_report schedules, when every probe meets the targets */
    int n = 1;
    for (double r = start; r < max; r = 2 * r < max ? 2 * r : max)
        n++;
    /* a miss at doubling probe k leaves k + steps <= n + steps */
    return n + steps;
}
