/* train_parts.c: batches, forward, sharded evaluation, data loading and progress lines for `baton train`
 * (see train.h; the loop itself is in train.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "train.h"
#include "util/util.h"

void train_next_batch(const baton_dataset *ds, const baton_dist_sampler *s, long pos, int b, batch_buf *buf) {
    baton_dataset_gather(ds, s->idx + pos, b, buf->x, buf->y);
}

/* Forward of one batch: returns the mean loss tensor; *correct gets the batch's correct predictions. */
baton_tensor *train_forward(baton_model *m, baton_tape *t, const baton_dataset *ds, batch_buf *buf, int b,
                            int *correct) {
    baton_tensor *x = baton_tape_input(t, 2, (int[]){b, ds->dim}, buf->x);
    baton_tensor *logits = baton_model_forward(m, t, x);
    *correct = baton_count_correct(logits->data, buf->y, b, ds->classes);
    return baton_cross_entropy(t, logits, buf->y);
}

/* Evaluates test samples [begin, end) in batches: the pieces a data-parallel run shards and sums. */
static void evaluate(baton_model *m, baton_tape *t, const baton_dataset *ds, long begin, long end, int eb,
                     batch_buf *buf, long *correct, long *count, double *loss_sum) {
    *correct = *count = 0;
    *loss_sum = 0.0;
    for (long i = begin; i < end; i += eb) {
        int b = (int)(end - i < eb ? end - i : eb);
        memcpy(buf->x, ds->x + (size_t)i * ds->dim, (size_t)b * ds->dim * sizeof(float));
        memcpy(buf->y, ds->y + i, (size_t)b * sizeof(int32_t));
        baton_tape_reset(t, 0);
        int c;
        baton_tensor *loss = train_forward(m, t, ds, buf, b, &c);
        *correct += c;
        *count += b;
        *loss_sum += (double)loss->data[0] * b;
    }
}

int train_batch_alloc(batch_buf *b, int n, int dim) {
    b->x = malloc((size_t)n * dim * sizeof(float));
    b->y = malloc((size_t)n * sizeof(int32_t));
    return b->x && b->y ? 0 : -1;
}
void train_batch_free(batch_buf *b) {
    free(b->x);
    free(b->y);
}

/* ---- progress -------------------------------------------------------------------------------------------- */

void train_progress_step(progress *p, const progress_at *at, int force) {
    uint64_t now = baton__now_ns();
    if (p->tty && !force && now - p->last_draw_ns < 100000000ull) return;
    if (!p->tty && !force && at->step_in_epoch % p->log_every != 0) return;
    p->last_draw_ns = now;
    double elapsed = (double)(now - p->start_ns) * 1e-9;
    long done = at->step - p->first_step, left = p->total - at->step;
    char el[16], eta[16];
    cli_format_duration(elapsed, el, sizeof el);
    cli_format_duration(done > 0 ? elapsed / (double)done * (double)left : -1.0, eta, sizeof eta);
    char where[96];
    long num = p->by_steps ? at->step : at->step_in_epoch, den = p->by_steps ? p->total : at->steps_per_epoch;
    if (p->tty) {
        int width = 24, fill = (int)(width * num / (den ? den : 1));
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        if (p->by_steps)
            snprintf(where, sizeof where, "step [%s] %ld/%ld (epoch %ld/%ld)", bar, num, den, at->epoch, at->epochs);
        else
            snprintf(where, sizeof where, "epoch %ld/%ld [%s] %ld/%ld", at->epoch, at->epochs, bar, num, den);
    } else if (p->by_steps) {
        snprintf(where, sizeof where, "step %ld/%ld (epoch %ld/%ld)", num, den, at->epoch, at->epochs);
    } else {
        snprintf(where, sizeof where, "epoch %ld/%ld step %ld/%ld", at->epoch, at->epochs, num, den);
    }
    fprintf(stderr, "%s%s  loss %.4f  acc %.2f%%  lr %.3g  %.0f samples/s  %s elapsed  ETA %s%s", p->tty ? "\r" : "",
            where, at->loss, 100.0 * at->acc, at->lr, at->sps, el, eta, p->tty ? "\033[K" : "\n");
}

int train_default_threads(int local_size) {
    long cores = cli_cores(), local = local_size > 0 ? local_size : 1;
    long t = cores / local;
    return t < 1 ? 1 : (int)t;
}

int train_threads(long asked, const baton_launch_env *le) {
    int threads = asked ? (int)asked : train_default_threads(le->local_size);
    long local = le->local_size > 0 ? le->local_size : 1, cores = cli_cores();
    if (asked && asked * local > cores && le->local_rank <= 0)
        fprintf(stderr, "baton train: warning: --threads %ld x %ld local %s = %ld threads on %ld %s: they will "
                "slow each other down; use --threads %ld or fewer (or leave it out: cores / local ranks)\n", asked, local,
                cli_plural(local, "rank", "ranks"), asked * local, cores, cli_plural(cores, "core", "cores"),
                cores / local > 0 ? cores / local : 1);
    baton_set_threads(threads);
    return threads;
}

/* Loads the training and test sets named by --data. */
int train_load_data(const char *data, const char *data_dir, long train_samples, uint64_t seed, baton_dataset *train,
                    baton_dataset *test) {
    if (strcmp(data, "synthetic")) return baton_dataset_fashion_mnist(train, test, data_dir);
    /* same prototypes (same seed), different noise: train and test are two parts of one stream */
    baton_dataset full;
    int rc = baton_dataset_synthetic(&full, (int)train_samples + 10000, 1, 28, 28, 10, seed);
    if (rc >= 0) rc = baton_dataset_synthetic(train, (int)train_samples, 1, 28, 28, 10, seed);
    if (rc >= 0) rc = baton_dataset_synthetic(test, 10000, 1, 28, 28, 10, seed);
    if (rc >= 0) {
        memcpy(test->x, full.x + (size_t)train_samples * full.dim, (size_t)10000 * full.dim * sizeof(float));
        memcpy(test->y, full.y + train_samples, 10000 * sizeof(int32_t));
        memcpy(train->x, full.x, (size_t)train_samples * full.dim * sizeof(float));
        memcpy(train->y, full.y, (size_t)train_samples * sizeof(int32_t));
    }
    baton_dataset_free(&full);
    return rc;
}

/* This rank's shard of the test set, then the counts summed over the ranks: every sample counted once. */
int train_evaluate_all(baton_comm *comm, baton_model *m, baton_tape *t, const baton_dataset *ds, int eb,
                       batch_buf *buf, double *acc, double *loss) {
    int rank = comm ? baton_comm_rank(comm) : 0, world = comm ? baton_comm_size(comm) : 1;
    long lo, hi, correct, count;
    double sums[3];
    baton_shard_range(ds->n, rank, world, &lo, &hi);
    evaluate(m, t, ds, lo, hi, eb, buf, &correct, &count, &sums[2]);
    sums[0] = (double)correct;
    sums[1] = (double)count;
    if (comm && world > 1) {
        int rc = baton_allreduce(comm, sums, sums, 3, BATON_F64, BATON_SUM);
        if (rc < 0) return rc;
    }
    *acc = sums[0] / sums[1];
    *loss = sums[2] / sums[1];
    return BATON_OK;
}

