/* plan_plot.c: `--plot FILE.svg`: panels side by side, each with axes (linear or log), model curves as
 * lines and measured points as dots. Written through the atomic file helper (no symlink followed). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util/files.h"
#include "baton/status.h"

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...) {
    if (s->oom) return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0) { s->oom = 1; return; }
        if ((size_t)n < s->cap - s->len) { s->len += (size_t)n; return; }
        size_t cap = (s->cap + (size_t)n + 1) * 2;
        char *nb = realloc(s->buf, cap);
        if (!nb) { s->oom = 1; return; }
        s->buf = nb;
        s->cap = cap;
    }
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

static double tr(double v, int lg) { return lg ? log10(v) : v; }

static void panel(sbuf *s, const plot_panel *p, double ox, double oy, double w, double h) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < p->nseries; i++)
        for (int k = 0; k < p->s[i].n; k++) {
            double x = p->s[i].x[k], y = p->s[i].y[k];
            if ((p->log_x && x <= 0) || (p->log_y && y <= 0) || !isfinite(x) || !isfinite(y)) continue;
            x = tr(x, p->log_x), y = tr(y, p->log_y);
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
        }
    if (!isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (!p->log_y && y0 > 0) y0 = 0;
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    double L = ox + 70, R = ox + w - 20, T = oy + 40, B = oy + h - 50;
#define PX(x) (L + (tr(x, p->log_x) - x0) / (x1 - x0) * (R - L))
#define PY(y) (B - (tr(y, p->log_y) - y0) / (y1 - y0) * (B - T))
    put(s, "<text x='%.0f' y='%.0f' font-size='15' text-anchor='middle'>%s</text>\n", (L + R) / 2, oy + 22, p->title);
    put(s, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#444'/>\n", L, T, R - L, B - T);
    for (int i = 0; i <= 4; i++) {
        double fx = x0 + (x1 - x0) * i / 4, fy = y0 + (y1 - y0) * i / 4;
        double vx = p->log_x ? pow(10, fx) : fx, vy = p->log_y ? pow(10, fy) : fy;
        double px = L + (R - L) * i / 4, py = B - (B - T) * i / 4;
        put(s, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", px, T, px, B);
        put(s, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", L, py, R, py);
        put(s, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%.3g</text>\n", px, B + 15, vx);
        put(s, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%.3g</text>\n", L - 4, py + 4, vy);
    }
    put(s, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle'>%s%s</text>\n", (L + R) / 2, B + 34, p->xlabel,
        p->log_x ? " (log)" : "");
    put(s, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle' transform='rotate(-90 %.0f %.0f)'>%s%s</text>\n",
        ox + 16, (T + B) / 2, ox + 16, (T + B) / 2, p->ylabel, p->log_y ? " (log)" : "");
    for (int i = 0; i < p->nseries; i++) {
        const plot_series *se = &p->s[i];
        const char *col = colors[i % 8];
        if (!se->dots) {
            put(s, "<polyline fill='none' stroke='%s' stroke-width='2' points='", col);
            for (int k = 0; k < se->n; k++)
                if ((!p->log_x || se->x[k] > 0) && (!p->log_y || se->y[k] > 0) && isfinite(se->y[k]))
                    put(s, "%.1f,%.1f ", PX(se->x[k]), PY(se->y[k]));
            put(s, "'/>\n");
        } else {
            for (int k = 0; k < se->n; k++)
                if ((!p->log_x || se->x[k] > 0) && (!p->log_y || se->y[k] > 0) && isfinite(se->y[k]))
                    put(s, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'/>\n", PX(se->x[k]), PY(se->y[k]), col);
        }
        put(s, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>%s %s</text>\n", L + 8, T + 14 + 14 * i, col,
            se->dots ? "&#9679;" : "&#8212;", se->label);
    }
#undef PX
#undef PY
}

int plan_plot_check(const char *sub, const char *path) {
    size_t pl = strlen(path);
    if (pl < 5 || strcmp(path + pl - 4, ".svg"))
        return plan_error(sub, "bad value '%s' for --plot: only SVG is written (name the file FILE.svg)", path);
    return 0;
}

int plan_plot_svg(const char *sub, const char *path, const plot_panel *panels, int npanels) {
    if (plan_plot_check(sub, path) < 0) return -1;
    sbuf s = {0};
    double w = 520, h = 380;
    put(&s, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif'>\n", w * npanels, h);
    put(&s, "<rect width='100%%' height='100%%' fill='white'/>\n");
    for (int i = 0; i < npanels; i++) panel(&s, &panels[i], w * i, 0, w, h);
    put(&s, "</svg>\n");
    if (s.oom) {
        free(s.buf);
        return plan_error(sub, "--plot: out of memory");
    }
    int rc = baton__write_atomic(path, s.buf, s.len, 0);
    free(s.buf);
    if (rc < 0) return plan_error(sub, "--plot: cannot write '%s': %s", path, baton_last_error());
    return 0;
}
