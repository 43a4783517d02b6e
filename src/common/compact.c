#include "compact.h"
#include "grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    F_DEAD = 1,
    F_ADDRESS = 2,
    F_SITE = 4,
    F_LABELS = 8,
    F_MPATH = 16,      /* version 2 */
    F_RECOMPUTED = 32, /* version 2 */
    F_KNOWN = 63
};

/* No record field needs more; a larger count is a corrupt file, not a big one. */
#define MAX_LABELS 1000000

void vt_cbuf_put(vt_cbuf *b, const void *data, size_t n)
{
    if (b->failed || !n)
        return;
    if (vt_grow(&b->p, &b->cap, b->len + n, 1, 4096)) {
        b->failed = true;
        return;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static size_t varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

void vt_cbuf_varint(vt_cbuf *b, uint64_t v)
{
    if (!b->failed && b->len + 10 <= b->cap)
        b->len += varint(b->p + b->len, v);
    else {
        uint8_t tmp[10];
        vt_cbuf_put(b, tmp, varint(tmp, v));
    }
}

void vt_cbuf_free(vt_cbuf *b)
{
    free(b->p);
    *b = (vt_cbuf){0};
}

/* The difference now - before as a zigzag varint: small either way. */
static void put_delta(vt_cbuf *b, uint64_t now, uint64_t *before)
{
    uint64_t d = now - *before;
    *before = now;
    vt_cbuf_varint(b, (d << 1) ^ (uint64_t)((int64_t)d >> 63));
}

static uint64_t get_delta(vt_creader *r, uint64_t *before)
{
    uint64_t z = vt_creader_varint(r);
    *before += (z >> 1) ^ (uint64_t) - (int64_t)(z & 1);
    return *before;
}

void vt_crec_put(vt_cbuf *b, vt_cdelta *d, const vt_crec *r)
{
    unsigned flags = (r->dead ? F_DEAD : 0) | (r->address ? F_ADDRESS : 0) |
                     (r->site != VT_CREC_NO_SITE ? F_SITE : 0) | (r->nlabels ? F_LABELS : 0) |
                     (r->mpath ? F_MPATH : 0) | (r->recomputed ? F_RECOMPUTED : 0);
    vt_cbuf_varint(b, flags);
    put_delta(b, r->id, &d->id);
    vt_cbuf_varint(b, r->device);
    vt_cbuf_varint(b, r->size);
    if (r->address)
        put_delta(b, r->address, &d->address);
    vt_cbuf_varint(b, r->api);
    vt_cbuf_varint(b, r->kind);
    put_delta(b, r->birth_us, &d->birth_us);
    put_delta(b, r->birth_seq, &d->birth_seq);
    vt_cbuf_varint(b, r->birth_phase);
    put_delta(b, r->birth_step, &d->step);
    put_delta(b, r->birth_instance, &d->instance);
    if (r->dead) {
        /* relative to the birth: deaths are not in any order */
        uint64_t at = r->birth_us, seq = r->birth_seq, step = r->birth_step,
                 instance = r->birth_instance;
        put_delta(b, r->death_us, &at);
        put_delta(b, r->death_seq, &seq);
        vt_cbuf_varint(b, r->death_phase);
        put_delta(b, r->death_step, &step);
        put_delta(b, r->death_instance, &instance);
    }
    if (r->site != VT_CREC_NO_SITE)
        vt_cbuf_varint(b, r->site);
    if (r->nlabels) {
        vt_cbuf_varint(b, r->nlabels);
        for (size_t i = 0; i < r->nlabels; i++) {
            vt_cbuf_varint(b, r->labels[i].off);
            vt_cbuf_varint(b, r->labels[i].bytes);
            vt_cbuf_varint(b, r->labels[i].cat);
        }
    }
    if (r->mpath)
        vt_cbuf_varint(b, r->mpath);
}

void vt_cevent_put(vt_cbuf *b, vt_cdelta *d, const vt_cevent *e)
{
    put_delta(b, e->time_us, &d->birth_us);
    put_delta(b, e->id, &d->id);
    uint64_t zero = 0;
    put_delta(b, (uint64_t)e->bytes, &zero);
}

size_t vt_csection_head(uint8_t out[VT_CSECTION_HEAD_MAX], const char tag[4], uint64_t count,
                        size_t len)
{
    uint8_t c[10];
    size_t nc = varint(c, count);
    memcpy(out, tag, 4);
    size_t n = 4 + varint(out + 4, nc + len);
    memcpy(out + n, c, nc);
    return n + nc;
}

uint64_t vt_creader_varint(vt_creader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; !r->bad; shift += 7) {
        if (r->p == r->end || shift > 63) {
            r->bad = true;
            break;
        }
        uint8_t c = *r->p++;
        if (shift == 63 && c > 1) {
            r->bad = true;
            break;
        }
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    return 0;
}

int vt_crec_get(vt_creader *r, vt_cdelta *d, vt_crec *o)
{
    uint64_t flags = vt_creader_varint(r);
    if (flags & ~(uint64_t)F_KNOWN)
        r->bad = true;
    *o = (vt_crec){
        .dead = flags & F_DEAD, .site = VT_CREC_NO_SITE, .recomputed = flags & F_RECOMPUTED};
    o->id = get_delta(r, &d->id);
    o->device = vt_creader_varint(r);
    o->size = vt_creader_varint(r);
    if (flags & F_ADDRESS)
        o->address = get_delta(r, &d->address);
    o->api = vt_creader_varint(r);
    o->kind = vt_creader_varint(r);
    o->birth_us = get_delta(r, &d->birth_us);
    o->birth_seq = get_delta(r, &d->birth_seq);
    o->birth_phase = vt_creader_varint(r);
    o->birth_step = get_delta(r, &d->step);
    o->birth_instance = get_delta(r, &d->instance);
    if (o->dead) {
        o->death_us = o->birth_us;
        o->death_seq = o->birth_seq;
        o->death_step = o->birth_step;
        o->death_instance = o->birth_instance;
        get_delta(r, &o->death_us);
        get_delta(r, &o->death_seq);
        o->death_phase = vt_creader_varint(r);
        get_delta(r, &o->death_step);
        get_delta(r, &o->death_instance);
    }
    if (flags & F_SITE)
        o->site = vt_creader_varint(r);
    if (flags & F_LABELS) {
        uint64_t n = vt_creader_varint(r);
        if (n == 0 || n > MAX_LABELS || n > (uint64_t)(r->end - r->p) / 3) {
            r->bad = true;
            return -1;
        }
        if (vt_grow(&r->labels, &r->labels_cap, (size_t)n, sizeof *r->labels, (size_t)n)) {
            r->bad = true;
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            r->labels[i].off = vt_creader_varint(r);
            r->labels[i].bytes = vt_creader_varint(r);
            r->labels[i].cat = vt_creader_varint(r);
        }
        o->nlabels = n;
        o->labels = r->labels;
    }
    if (flags & F_MPATH && !(o->mpath = vt_creader_varint(r)))
        r->bad = true;
    return r->bad ? -1 : 0;
}

int vt_cevent_get(vt_creader *r, vt_cdelta *d, vt_cevent *o)
{
    o->time_us = get_delta(r, &d->birth_us);
    o->id = get_delta(r, &d->id);
    uint64_t bytes = 0;
    o->bytes = (int64_t)get_delta(r, &bytes);
    return r->bad ? -1 : 0;
}

void vt_creader_free(vt_creader *r)
{
    free(r->labels);
    r->labels = NULL;
    r->labels_cap = 0;
}

bool vt_compact_is(const char *buf, size_t len)
{
    return len >= 8 && !memcmp(buf, VT_COMPACT_MAGIC, 8);
}

int vt_compact_open(const char *buf, size_t len, vt_compact *c, char *why, size_t whylen)
{
    *c = (vt_compact){0};
    const char *nl = memchr(buf, '\n', len < 32 ? len : 32);
    unsigned long version = nl ? strtoul(buf + 8, NULL, 10) : 0;
    if (!nl || version < 1) {
        snprintf(why, whylen, "the compact file's first line is damaged");
        return -1;
    }
    if (version > VT_COMPACT_VERSION) {
        snprintf(why, whylen,
                 "compact snapshot container version %lu is newer than this vramtap reads (%d): "
                 "update vramtap",
                 version, VT_COMPACT_VERSION);
        return -1;
    }
    c->head = nl + 1;
    const char *nul = memchr(c->head, 0, len - (size_t)(c->head - buf));
    if (!nul) {
        snprintf(why, whylen, "the compact file is cut short in its head");
        return -1;
    }
    c->head_len = (size_t)(nul - c->head);
    vt_creader r = {(const uint8_t *)nul + 1, (const uint8_t *)buf + len, false, NULL, 0};
    for (;;) {
        if (r.end - r.p < 4) {
            snprintf(why, whylen, "the compact file is cut short (no %s section)", VT_SEC_END);
            return -1;
        }
        char tag[5] = {0}, shown[5] = {0};
        memcpy(tag, r.p, 4);
        r.p += 4;
        /* A damaged tag is named in a message of one line: its odd bytes become '?'. */
        for (int k = 0; k < 4; k++)
            shown[k] = tag[k] >= 0x20 && tag[k] < 0x7f ? tag[k] : '?';
        uint64_t n = vt_creader_varint(&r);
        if (r.bad || n > (uint64_t)(r.end - r.p)) {
            snprintf(why, whylen, "the compact file's section %s is cut short", shown);
            return -1;
        }
        struct {
            const char *tag;
            const uint8_t **p;
            size_t *len;
        } known[] = {
            {VT_SEC_ALLOCATIONS, &c->allocations, &c->allocations_len},
            {VT_SEC_HISTORY_ALLOCATIONS, &c->history_allocations, &c->history_allocations_len},
            {VT_SEC_HISTORY_EVENTS, &c->history_events, &c->history_events_len},
        };
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!memcmp(tag, known[k].tag, 4)) {
                if (*known[k].p) {
                    snprintf(why, whylen, "the compact file has two %s sections", shown);
                    return -1;
                }
                *known[k].p = r.p;
                *known[k].len = (size_t)n;
            }
        r.p += n;
        if (!memcmp(tag, VT_SEC_END, 4))
            return 0;
    }
}
