/* The growth model behind `vramtap fit`: least squares over a handful of runs, a choice
 * between a line and an upward parabola, per-phase peaks, and the largest X under a budget. */
#include <math.h>
#include <string.h>

#include "fit.h"

/* Beyond this an X is no longer a batch size or a length: nothing meaningful grows that slowly. */
#define MAX_X 1e15

const char *vt_grow_name(vt_grow_kind k)
{
    static const char *const names[] = {"fixed", "linear", "quadratic"};
    return names[k];
}

const char *vt_fit_cat_key(int c)
{
    return c == VT_FIT_UNATTRIBUTED ? "unattributed" : vt_category_key((vt_category)c);
}

const char *vt_fit_cat_label(int c)
{
    return c == VT_FIT_UNATTRIBUTED ? "unattributed" : vt_category_label((vt_category)c);
}

static double model_at(const vt_growth *g, double x)
{
    return g->a + g->b * x + g->c * x * x;
}

/* How far the runs are from the model: the worst run and whether any is off. */
static void measure_off(const int64_t *x, const int64_t *y, size_t n, vt_growth *g)
{
    g->off = false;
    g->worst_off = 0;
    g->worst_run = 0;
    for (size_t i = 0; i < n; i++) {
        double miss = fabs((double)y[i] - model_at(g, (double)x[i]));
        /* half a byte: the model is exact in bytes when it passes through the run */
        g->off |= miss > VT_FIT_TOLERANCE * (double)y[i] + 0.5;
        double rel = miss / (double)(y[i] > 0 ? y[i] : 1);
        if (rel > g->worst_off) {
            g->worst_off = rel;
            g->worst_run = i;
        }
    }
}

/* Exact data through the centred form comes back a few ulps off whole bytes: a coefficient that
 * close to a whole number is that number. */
static double snap(double v)
{
    double r = round(v);
    return fabs(v - r) <= fmax(1e-6, 1e-9 * fabs(v)) ? r : v;
}

/* Least squares of degree 1 or 2 on u = (x - mean) / spread, which keeps the normal equations
 * well conditioned whatever the scale of X, then expressed in X. */
static void least_squares(const int64_t *x, const int64_t *y, size_t n, int degree, vt_growth *g)
{
    double mean = 0, spread = 0;
    for (size_t i = 0; i < n; i++)
        mean += (double)x[i] / (double)n;
    for (size_t i = 0; i < n; i++)
        spread = fmax(spread, fabs((double)x[i] - mean));
    /* m[r][k]: the normal equations' matrix (sums of u^(r+k)) with the right-hand side in k = 3 */
    double m[3][4] = {{0}};
    int k = degree + 1;
    for (size_t i = 0; i < n; i++) {
        double u = ((double)x[i] - mean) / spread, p[5] = {1, u, u * u, u * u * u, u * u * u * u};
        for (int r = 0; r < k; r++) {
            for (int c = 0; c < k; c++)
                m[r][c] += p[r + c];
            m[r][3] += p[r] * (double)y[i];
        }
    }
    /* Gaussian elimination with partial pivoting; the caller guarantees k distinct X, so the
     * matrix is regular */
    for (int col = 0; col < k; col++) {
        int piv = col;
        for (int r = col + 1; r < k; r++)
            if (fabs(m[r][col]) > fabs(m[piv][col]))
                piv = r;
        for (int c = 0; c < 4; c++) {
            double t = m[col][c];
            m[col][c] = m[piv][c];
            m[piv][c] = t;
        }
        for (int r = 0; r < k; r++) {
            if (r == col)
                continue;
            double f = m[r][col] / m[col][col];
            for (int c = col; c < 4; c++)
                m[r][c] -= f * m[col][c];
        }
    }
    double A = m[0][3] / m[0][0], B = m[1][3] / m[1][1], C = k == 3 ? m[2][3] / m[2][2] : 0;
    g->kind = degree == 2 ? VT_GROW_QUADRATIC : VT_GROW_LINEAR;
    g->c = snap(C / (spread * spread));
    g->b = snap(B / spread - 2 * C * mean / (spread * spread));
    g->a = snap(A - B * mean / spread + C * mean * mean / (spread * spread));
    measure_off(x, y, n, g);
}

static size_t distinct(const int64_t *x, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && x[j] != x[i])
            j++;
        d += j == i;
    }
    return d;
}

void vt_growth_fit(const int64_t *x, const int64_t *y, size_t n, vt_growth *g)
{
    memset(g, 0, sizeof *g);
    size_t same = 1;
    while (same < n && y[same] == y[0])
        same++;
    if (same == n) {
        g->kind = VT_GROW_FIXED;
        g->a = (double)y[0];
        return;
    }
    least_squares(x, y, n, 1, g);
    if (!g->off || distinct(x, n) < 3)
        return;
    vt_growth q;
    least_squares(x, y, n, 2, &q);
    if (q.c > 0 && !q.off)
        *g = q;
}

int64_t vt_growth_at(const vt_growth *g, int64_t x)
{
    double v = round(model_at(g, (double)x));
    return v <= 0 ? 0 : v >= (double)VT_MAX_BYTES ? VT_MAX_BYTES : (int64_t)v;
}

/* --- one device over the runs ----------------------------------------------------------- */

bool vt_fit_run_has_cats(const vt_fit *f, size_t i)
{
    return f->pts[i].phase_cats[f->cat_phase][0] >= 0;
}

/* The phase the categories are fitted at, and the runs that know them there. */
static void choose_cat_runs(vt_fit *f, const int64_t *xs)
{
    const vt_fit_point *pts = f->pts;
    size_t last = 0;
    for (size_t i = 0; i < f->n; i++) {
        f->peak_moved |= pts[i].peak_phase != pts[0].peak_phase;
        if (pts[i].x >= pts[last].x)
            last = i;
    }
    f->cat_phase = pts[last].peak_phase;
    int64_t x[f->n];
    f->cat_runs = 0;
    for (size_t i = 0; i < f->n; i++)
        if (vt_fit_run_has_cats(f, i))
            x[f->cat_runs++] = xs[i];
    f->have_cats = distinct(x, f->cat_runs) >= 2;
}

static void fit_categories(vt_fit *f)
{
    int64_t x[f->n], y[f->n];
    for (int c = 0; c < VT_FIT_NCATS; c++) {
        size_t k = 0;
        for (size_t i = 0; i < f->n; i++)
            if (vt_fit_run_has_cats(f, i)) {
                x[k] = f->pts[i].x;
                y[k++] = f->pts[i].phase_cats[f->cat_phase][c];
            }
        vt_growth_fit(x, y, k, &f->cat[c]);
        f->fixed_changed[c] =
            (c == VT_CAT_PARAMETERS || c == VT_CAT_GRADIENTS || c == VT_CAT_OPTIMIZER_STATE) &&
            f->cat[c].kind != VT_GROW_FIXED;
    }
}

static void fit_gaps(vt_fit *f)
{
    bool reserved = true, used = true;
    for (size_t i = 0; i < f->n; i++) {
        reserved &= f->pts[i].reserved_bytes >= 0 && f->pts[i].peak_bytes > 0;
        used &= f->pts[i].used_bytes >= 0;
    }
    f->reserved_ratio = reserved ? 0 : NAN;
    f->used_extra = used ? 0 : -1;
    for (size_t i = 0; i < f->n; i++) {
        const vt_fit_point *p = &f->pts[i];
        if (reserved)
            f->reserved_ratio =
                fmax(f->reserved_ratio,
                     (double)(p->reserved_bytes - p->peak_bytes) / (double)p->peak_bytes);
        int64_t below = reserved ? p->reserved_bytes : p->peak_bytes;
        if (used && p->used_bytes - below > f->used_extra)
            f->used_extra = p->used_bytes - below;
    }
}

void vt_fit_build(const vt_fit_point *pts, size_t n, vt_fit *f)
{
    memset(f, 0, sizeof *f);
    f->pts = pts;
    f->n = n;
    int64_t x[n], y[n];
    for (size_t i = 0; i < n; i++)
        x[i] = pts[i].x;
    for (int p = 0; p < VT_FIT_NPHASES; p++) {
        f->phase_modelled[p] = true;
        for (size_t i = 0; i < n; i++) {
            y[i] = pts[i].phase_bytes[p];
            f->phase_modelled[p] &= y[i] >= 0;
        }
        if (f->phase_modelled[p])
            vt_growth_fit(x, y, n, &f->phase[p]);
    }
    choose_cat_runs(f, x);
    if (f->have_cats)
        fit_categories(f);
    fit_gaps(f);
}

/* The gaps applied to a figure of tensor bytes. */
static void add_gaps(const vt_fit *f, int64_t tensors, int64_t *reserved, int64_t *used)
{
    *reserved =
        isnan(f->reserved_ratio) ? -1 : (int64_t)llround((double)tensors * (1 + f->reserved_ratio));
    *used = f->used_extra < 0 ? -1 : (*reserved >= 0 ? *reserved : tensors) + f->used_extra;
}

void vt_fit_predict(const vt_fit *f, int64_t x, vt_fit_prediction *p)
{
    memset(p, 0, sizeof *p);
    p->x = x;
    p->phase = VT_NOPHASE;
    p->peak_bytes = -1;
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++) {
        p->phase_bytes[ph] = f->phase_modelled[ph] ? vt_growth_at(&f->phase[ph], x) : -1;
        /* a tie goes to the earlier phase of a step */
        if (p->phase_bytes[ph] > p->peak_bytes) {
            p->peak_bytes = p->phase_bytes[ph];
            p->phase = (vt_phase)ph;
        }
    }
    p->have_cats = f->have_cats && f->cat_phase == p->phase;
    for (int c = 0; c < VT_FIT_NCATS && p->have_cats; c++)
        p->cat_bytes[c] = vt_growth_at(&f->cat[c], x);
    add_gaps(f, p->peak_bytes, &p->reserved_bytes, &p->used_bytes);
    p->compared_bytes = p->used_bytes >= 0       ? p->used_bytes
                        : p->reserved_bytes >= 0 ? p->reserved_bytes
                                                 : p->peak_bytes;
}

/* The largest real X at which one phase's peak stays within `room` tensor bytes: +inf when it
 * never outgrows it, -inf when it never fits. */
static double phase_limit(const vt_growth *g, double room)
{
    if (g->kind == VT_GROW_QUADRATIC) {
        double disc = g->b * g->b - 4 * g->c * (g->a - room);
        return disc < 0 ? -INFINITY : (-g->b + sqrt(disc)) / (2 * g->c);
    }
    if (g->b > 0)
        return (room - g->a) / g->b;
    return g->a <= room ? INFINITY : -INFINITY;
}

static bool fits(const vt_fit *f, int64_t x, int64_t budget)
{
    vt_fit_prediction p;
    vt_fit_predict(f, x, &p);
    return p.compared_bytes <= budget;
}

int64_t vt_fit_largest(const vt_fit *f, int64_t budget)
{
    /* invert the gaps: the tensor bytes that leave the compared figure within the budget */
    double room = (double)budget;
    if (f->used_extra >= 0)
        room -= (double)f->used_extra;
    if (!isnan(f->reserved_ratio))
        room /= 1 + f->reserved_ratio;
    double limit = INFINITY;
    bool grows = false;
    for (int p = 0; p < VT_FIT_NPHASES; p++)
        if (f->phase_modelled[p]) {
            limit = fmin(limit, phase_limit(&f->phase[p], room));
            grows |= f->phase[p].kind != VT_GROW_FIXED && f->phase[p].b + f->phase[p].c > 0;
        }
    if (!grows || limit > MAX_X)
        return -1;
    if (limit < 1)
        return fits(f, 1, budget) ? 1 : 0;
    /* the closed form is exact in reals; the prediction rounds to bytes */
    int64_t x = (int64_t)floor(limit);
    while (x > 0 && !fits(f, x, budget))
        x--;
    while (fits(f, x + 1, budget))
        x++;
    return x;
}
