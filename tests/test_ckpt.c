/* test_ckpt.c: checkpoint directories (src/ckpt/checkpoint.c): round trips for sgd and adamw, keeping the
 * last two, torn / truncated / corrupted / uncommitted checkpoints (the loader falls back to the older
 * complete one), hostile files under a valid commit record (clean one-line errors naming the file), model
 * and optimizer mismatches (state untouched), and a writer SIGKILLed at 50 random points while it writes
 * checkpoints in a loop: after every kill the loader finds a complete checkpoint whose content is exactly
 * what was saved for its step. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton/nn.h"
#include "ckpt/checkpoint.h"
#include "util/files.h"
#include "harness.h"

/* ---- fixtures ------------------------------------------------------------------------------------------ */
static baton_params *make_params(int wide) {
    baton_param_info v[] = {{"fc1.weight", 2, {wide, 100}, 0, 0, 1}, {"fc1.bias", 1, {wide}, 0, 0, 0},
                            {"fc2.weight", 2, {10, wide}, 0, 0, 1}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 3));
    return p;
}

static baton_optim *make_optim(baton_params *p, int kind) {
    baton_optim *o;
    baton_optim_config c = {.kind = kind, .momentum = 0.9f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                            .eps = 1e-8f};
    ASSERT_OK(baton_optim_new(&o, p, &c));
    return o;
}

/* Exact small integers as floats, different per step, slot and element. */
static float val(long step, int slot, size_t i) { return (float)((step * 7919 + (long)i * 31 + slot * 101) % 1000003); }

/* Fills params / optimizer state (not the alignment padding) and the state for `step`. */
static void fill(baton_params *p, baton_optim *o, long step, baton_ckpt_state *st, baton_ckpt_rank *ranks) {
    for (int i = 0; i < baton_params_count(p); i++) {
        const baton_param_info *v = baton_params_info(p, i);
        for (size_t j = v->offset; j < v->offset + v->count; j++) {
            baton_params_data(p)[j] = val(step, 0, j);
            for (int s = 0; s < 2; s++)
                if (baton_optim_state(o, s)) baton_optim_state(o, s)[j] = val(step, s + 1, j);
        }
    }
    baton_optim_set_steps(o, step);
    memset(st, 0, sizeof *st);
    st->step = step;
    st->epoch = step / 10;
    st->epoch_step = step % 10;
    st->sample_offset = st->epoch_step * 64;
    st->sched = (baton_lr_schedule){.kind = BATON_SCHED_COSINE, .lr = 0.05f, .warmup = 3, .total = 1000, .min_lr = 0.001f,
                                    .step_every = 10, .gamma = 0.1f};
    st->optim_steps = step;
    st->loss_scale = BATON_LOSS_SCALE_DYNAMIC;
    st->scaler = (baton_ddp_scaler){.scale = 1024.0f, .good_steps = step % 7, .skipped = step / 9};
    snprintf(st->config, sizeof st->config, "model=test wide=%d", (int)baton_params_info(p, 1)->count);
    st->world = 2;
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) ranks[r].rng[k] = (uint64_t)step * 1000003u + (uint64_t)(r * 4 + k) + 1;
    st->ranks = ranks;
}

/* Asserts that p, o and st hold exactly what fill() made for st->step. */
static void check_content(baton_params *p, baton_optim *o, const baton_ckpt_state *st) {
    long step = st->step;
    ASSERT_EQ_INT(st->epoch, step / 10);
    ASSERT_EQ_INT(st->epoch_step, step % 10);
    ASSERT_EQ_INT(st->sample_offset, (step % 10) * 64);
    ASSERT_EQ_INT(st->optim_steps, step);
    ASSERT_EQ_INT(baton_optim_steps(o), step);
    ASSERT_EQ_INT(st->sched.kind, BATON_SCHED_COSINE);
    ASSERT_TRUE(st->sched.lr == 0.05f && st->sched.min_lr == 0.001f && st->sched.gamma == 0.1f);
    ASSERT_EQ_INT(st->sched.warmup, 3);
    ASSERT_EQ_INT(st->sched.total, 1000);
    ASSERT_EQ_INT(st->loss_scale, BATON_LOSS_SCALE_DYNAMIC);
    ASSERT_TRUE(st->scaler.scale == 1024.0f);
    ASSERT_EQ_INT(st->scaler.good_steps, step % 7);
    ASSERT_EQ_INT(st->scaler.skipped, step / 9);
    ASSERT_EQ_INT(st->world, 2);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) ASSERT_EQ_U64(st->ranks[r].rng[k], (uint64_t)step * 1000003u + (uint64_t)(r * 4 + k) + 1);
    for (int i = 0; i < baton_params_count(p); i++) {
        const baton_param_info *v = baton_params_info(p, i);
        for (size_t j = v->offset; j < v->offset + v->count; j++) {
            if (baton_params_data(p)[j] != val(step, 0, j)) th_fail(__FILE__, __LINE__, "param %zu of step %ld", j, step);
            for (int s = 0; s < 2; s++)
                if (baton_optim_state(o, s) && baton_optim_state(o, s)[j] != val(step, s + 1, j))
                    th_fail(__FILE__, __LINE__, "optimizer slot %d element %zu of step %ld", s, j, step);
        }
    }
}

static void save_step(const char *dir, baton_params *p, baton_optim *o, long step) {
    baton_ckpt_state st;
    baton_ckpt_rank ranks[2];
    fill(p, o, step, &st, ranks);
    ASSERT_OK(baton_ckpt_save(dir, p, o, &st));
}

static char *ckdir(void) {
    static char d[512];
    snprintf(d, sizeof d, "%s/ck", th_tmpdir());
    return d;
}

static char *file_of(long step, const char *name) {
    static char buf[4][600];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 600, "%s/step-%ld/%s", ckdir(), step, name);
    return p;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void put_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ_INT(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static long file_size(const char *path) {
    struct stat sb;
    ASSERT_TRUE(stat(path, &sb) == 0);
    return (long)sb.st_size;
}

/* Loads into fresh objects; returns the status and leaves the step in *step (-1 on failure). */
static int load_step(int kind, long *step) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, kind);
    baton_ckpt_state st;
    int rc = baton_ckpt_load(ckdir(), p, o, &st);
    *step = rc == 0 ? st.step : -1;
    if (rc == 0) check_content(p, o, &st);
    baton_ckpt_state_free(&st);
    baton_optim_free(o);
    baton_params_free(p);
    return rc;
}

/* ---- round trips and retention --------------------------------------------------------------------- */
static void round_trip(int kind) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, kind);
    save_step(ckdir(), p, o, 7);
    long step;
    ASSERT_OK(load_step(kind, &step));
    ASSERT_EQ_INT(step, 7);
    /* the slabs, padding included, are byte-identical to the saved ones */
    baton_params *q = make_params(50);
    baton_optim *u = make_optim(q, kind);
    baton_ckpt_state st;
    ASSERT_OK(baton_ckpt_load(ckdir(), q, u, &st));
    size_t n = baton_params_numel(p) * sizeof(float);
    ASSERT_TRUE(!memcmp(baton_params_data(p), baton_params_data(q), n));
    ASSERT_TRUE(!memcmp(baton_optim_state(o, 0), baton_optim_state(u, 0), n));
    if (kind == BATON_OPTIM_ADAMW) ASSERT_TRUE(!memcmp(baton_optim_state(o, 1), baton_optim_state(u, 1), n));
    baton_ckpt_state_free(&st);
    baton_ckpt_state_free(&st);   /* twice is harmless */
    baton_optim_free(u);
    baton_params_free(q);
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(ckpt_round_trip_sgd) { round_trip(BATON_OPTIM_SGD); }
TEST(ckpt_round_trip_adamw) { round_trip(BATON_OPTIM_ADAMW); }

TEST(ckpt_keeps_the_last_two_and_no_temporaries) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_ADAMW);
    int committed;
    long newest;
    ASSERT_OK(baton_ckpt_scan(ckdir(), &committed, &newest));   /* missing directory: empty */
    ASSERT_EQ_INT(committed, 0);
    ASSERT_EQ_INT(newest, -1);
    for (long s = 5; s <= 30; s += 5) save_step(ckdir(), p, o, s);
    ASSERT_OK(baton_ckpt_scan(ckdir(), &committed, &newest));
    ASSERT_EQ_INT(committed, 2);
    ASSERT_EQ_INT(newest, 30);
    ASSERT_TRUE(exists(file_of(25, "COMMIT")) && exists(file_of(30, "COMMIT")));
    ASSERT_TRUE(!exists(file_of(20, "")));
    ASSERT_TRUE(!exists(file_of(30, "state.json.tmp")) && !exists(file_of(30, "COMMIT.tmp")));
    /* saving a step that exists again replaces it */
    save_step(ckdir(), p, o, 30);
    long step;
    ASSERT_OK(load_step(BATON_OPTIM_ADAMW, &step));
    ASSERT_EQ_INT(step, 30);
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(ckpt_ignores_names_that_are_not_canonical_steps) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    save_step(ckdir(), p, o, 10);
    char path[600];
    const char *junk[] = {"step-010", "step-", "step-1x", "step--5", "step-99999999999999999999", "other"};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", ckdir(), junk[i]);
        ASSERT_TRUE(mkdir(path, 0755) == 0);
    }
    long step;
    ASSERT_OK(load_step(BATON_OPTIM_SGD, &step));
    ASSERT_EQ_INT(step, 10);
    baton_optim_free(o);
    baton_params_free(p);
}

/* ---- torn and damaged checkpoints ---------------------------------------------------------------- */
/* Two checkpoints (10, 20); `damage` spoils step 20; the loader must come back with step 10. */
static void falls_back(void (*damage)(void), int expect_fallback) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_ADAMW);
    save_step(ckdir(), p, o, 10);
    save_step(ckdir(), p, o, 20);
    damage();
    long step;
    ASSERT_OK(load_step(BATON_OPTIM_ADAMW, &step));
    ASSERT_EQ_INT(step, expect_fallback ? 10 : 20);
    baton_optim_free(o);
    baton_params_free(p);
}

static void drop_commit(void) { ASSERT_TRUE(unlink(file_of(20, "COMMIT")) == 0); }
static void truncate_optim(void) { ASSERT_TRUE(truncate(file_of(20, "optim.safetensors"), 1000) == 0); }
static void drop_model(void) { ASSERT_TRUE(unlink(file_of(20, "model.safetensors")) == 0); }
static void flip_state_byte(void) {
    int fd = open(file_of(20, "state.json"), O_RDWR);
    ASSERT_TRUE(fd >= 0);
    char c;
    ASSERT_EQ_INT(pread(fd, &c, 1, 40), 1);
    c ^= 0x01;
    ASSERT_EQ_INT(pwrite(fd, &c, 1, 40), 1);
    close(fd);
}
static void flip_param_bit(void) {   /* same size, one bit of one float */
    int fd = open(file_of(20, "model.safetensors"), O_RDWR);
    long off = file_size(file_of(20, "model.safetensors")) - 3;
    unsigned char c;
    ASSERT_EQ_INT(pread(fd, &c, 1, off), 1);
    c ^= 0x10;
    ASSERT_EQ_INT(pwrite(fd, &c, 1, off), 1);
    close(fd);
}
static void garbage_commit(void) { put_file(file_of(20, "COMMIT"), "{\"format\": \"baton-checkpoint\", \"step\": ", 39); }
static void commit_of_other_step(void) {
    char buf[8192];
    FILE *f = fopen(file_of(10, "COMMIT"), "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    put_file(file_of(20, "COMMIT"), buf, n);   /* step 10's record in step 20's directory */
}
static void leftover_tmp(void) { put_file(file_of(20, "model.safetensors.tmp"), "partial", 7); }

TEST(ckpt_missing_commit_record_is_a_torn_write) { falls_back(drop_commit, 1); }
TEST(ckpt_truncated_file_falls_back_to_the_older_checkpoint) { falls_back(truncate_optim, 1); }
TEST(ckpt_missing_file_falls_back) { falls_back(drop_model, 1); }
TEST(ckpt_corrupted_state_falls_back) { falls_back(flip_state_byte, 1); }
TEST(ckpt_one_flipped_parameter_bit_falls_back) { falls_back(flip_param_bit, 1); }
TEST(ckpt_garbage_commit_record_falls_back) { falls_back(garbage_commit, 1); }
TEST(ckpt_commit_record_of_another_step_falls_back) { falls_back(commit_of_other_step, 1); }
TEST(ckpt_leftover_temporary_is_ignored) { falls_back(leftover_tmp, 0); }

TEST(ckpt_only_torn_is_not_found_only_damaged_is_an_error) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    long step;
    ASSERT_EQ_INT(load_step(BATON_OPTIM_SGD, &step), BATON_ENOTFOUND);   /* no directory at all */
    save_step(ckdir(), p, o, 20);
    ASSERT_TRUE(unlink(file_of(20, "COMMIT")) == 0);
    ASSERT_EQ_INT(load_step(BATON_OPTIM_SGD, &step), BATON_ENOTFOUND);
    int committed;
    long newest;
    ASSERT_OK(baton_ckpt_scan(ckdir(), &committed, &newest));
    ASSERT_EQ_INT(committed, 0);
    save_step(ckdir(), p, o, 30);
    ASSERT_TRUE(truncate(file_of(30, "model.safetensors"), 7) == 0);
    ASSERT_EQ_INT(load_step(BATON_OPTIM_SGD, &step), BATON_EFORMAT);
    ASSERT_CONTAINS(baton_last_error(), "no complete checkpoint verifies");
    ASSERT_CONTAINS(baton_last_error(), "step-30/model.safetensors");
    baton_optim_free(o);
    baton_params_free(p);
}

/* ---- hostile content under a valid commit record -------------------------------------------------- */
/* Replaces step 10's `name` with buf and re-commits, then expects a load to fail with rc naming the file. */
static void hostile(const char *name, const void *buf, size_t len, int rc, const char *needle) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    save_step(ckdir(), p, o, 10);
    put_file(file_of(10, name), buf, len);
    char stepdir[600];
    snprintf(stepdir, sizeof stepdir, "%s/step-10", ckdir());
    ASSERT_OK(baton__ckpt_commit(stepdir, 10));
    /* fresh objects: they must come back untouched */
    baton_params *q = make_params(50);
    baton_optim *u = make_optim(q, BATON_OPTIM_SGD);
    baton_ckpt_state st;
    ASSERT_EQ_INT(baton_ckpt_load(ckdir(), q, u, &st), rc);
    fprintf(stderr, "  %s\n", baton_last_error());
    ASSERT_CONTAINS(baton_last_error(), name);
    ASSERT_CONTAINS(baton_last_error(), needle);
    ASSERT_TRUE(strchr(baton_last_error(), '\n') == NULL);
    for (size_t i = 0; i < baton_params_numel(q); i++) ASSERT_TRUE(baton_params_data(q)[i] == 0.0f);
    ASSERT_EQ_INT(baton_optim_steps(u), 0);
    ASSERT_TRUE(st.ranks == NULL);
    baton_optim_free(u);
    baton_params_free(q);
    baton_optim_free(o);
    baton_params_free(p);
}

static void hostile_state(const char *json, const char *needle) {
    hostile("state.json", json, strlen(json), BATON_EFORMAT, needle);
}

#define STATE_HEAD "{\"format\":\"baton-train-state\",\"version\":1,"
#define STATE_SCHED "\"schedule\":{\"kind\":\"cosine\",\"lr\":0.05,\"warmup\":3,\"total\":100,\"min_lr\":0,\"step_every\":10,\"gamma\":0.1},"
#define STATE_SCALE "\"loss_scale\":{\"mode\":\"none\",\"scale\":1,\"good_steps\":0,\"skipped\":0},"
#define RNG1 "{\"rng\":[\"0000000000000001\",\"0000000000000002\",\"0000000000000003\",\"0000000000000004\"]}"
#define STATE_OK_BUT(steps, ranks) STATE_HEAD steps STATE_SCHED STATE_SCALE "\"config\":\"x\"," ranks "}"
#define STEPS "\"step\":10,\"epoch\":1,\"epoch_step\":0,\"sample_offset\":0,\"optimizer_steps\":10,"

TEST(ckpt_state_json_that_is_valid_loads) {
    /* the hostile cases below differ from this one in one place each */
    const char *ok = STATE_OK_BUT(STEPS, "\"world_size\":1,\"ranks\":[" RNG1 "]");
    baton_ckpt_state st;
    ASSERT_OK(baton__ckpt_parse_state(ok, strlen(ok), "ok", &st));
    ASSERT_EQ_INT(st.world, 1);
    ASSERT_EQ_U64(st.ranks[0].rng[3], 4);
    baton_ckpt_state_free(&st);
}

TEST(ckpt_state_json_not_json) { hostile_state("step=10", "not a JSON object"); }
TEST(ckpt_state_json_array) { hostile_state("[1,2,3]", "not a JSON object"); }
TEST(ckpt_state_json_wrong_format) { hostile_state("{\"format\":\"something else\"}", "'format'"); }
TEST(ckpt_state_json_step_is_a_string) {
    hostile_state(STATE_OK_BUT("\"step\":\"10\",\"epoch\":1,\"epoch_step\":0,\"sample_offset\":0,\"optimizer_steps\":10,",
                               "\"world_size\":1,\"ranks\":[" RNG1 "]"), "'step'");
}
TEST(ckpt_state_json_negative_and_fractional) {
    hostile_state(STATE_OK_BUT("\"step\":10,\"epoch\":-1,\"epoch_step\":0,\"sample_offset\":0,\"optimizer_steps\":10,",
                               "\"world_size\":1,\"ranks\":[" RNG1 "]"), "'epoch'");
}
TEST(ckpt_state_json_huge_numbers) {
    hostile_state(STATE_OK_BUT("\"step\":1e300,\"epoch\":1,\"epoch_step\":0,\"sample_offset\":0,\"optimizer_steps\":10,",
                               "\"world_size\":1,\"ranks\":[" RNG1 "]"), "'step'");
}
TEST(ckpt_state_json_ranks_disagree_with_world_size) {
    hostile_state(STATE_OK_BUT(STEPS, "\"world_size\":3,\"ranks\":[" RNG1 "]"), "'ranks'");
}
TEST(ckpt_state_json_world_size_absurd) {
    hostile_state(STATE_OK_BUT(STEPS, "\"world_size\":100000000,\"ranks\":[" RNG1 "]"), "'world_size'");
}
TEST(ckpt_state_json_bad_rng) {
    hostile_state(STATE_OK_BUT(STEPS, "\"world_size\":1,\"ranks\":[{\"rng\":[\"xyz\",\"0\",\"0\",\"0\"]}]"), "rng");
    hostile_state(STATE_OK_BUT(STEPS, "\"world_size\":1,\"ranks\":[{\"rng\":[\"0000000000000000\",\"0000000000000000\","
                                      "\"0000000000000000\",\"0000000000000000\"]}]"), "all zero");
}
TEST(ckpt_state_json_unknown_schedule) {
    const char *s = STATE_HEAD STEPS "\"schedule\":{\"kind\":\"exotic\",\"lr\":0.05,\"warmup\":3,\"total\":100,\"min_lr\":0,"
                    "\"step_every\":10,\"gamma\":0.1}," STATE_SCALE "\"config\":\"x\",\"world_size\":1,\"ranks\":[" RNG1 "]}";
    hostile_state(s, "'kind'");
}
TEST(ckpt_state_json_loss_scale_out_of_range) {
    const char *s = STATE_HEAD STEPS STATE_SCHED "\"loss_scale\":{\"mode\":\"dynamic\",\"scale\":1e30,\"good_steps\":0,"
                    "\"skipped\":0},\"config\":\"x\",\"world_size\":1,\"ranks\":[" RNG1 "]}";
    hostile_state(s, "'scale'");
}
TEST(ckpt_state_json_over_the_size_limit) {
    size_t n = BATON_CKPT_MAX_STATE + 10;
    char *big = malloc(n);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    hostile("state.json", big, n, BATON_EFORMAT, "limit");
    free(big);
}

static void le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

TEST(ckpt_model_file_header_too_large) {
    unsigned char b[64] = {0};
    le64(b, (uint64_t)1 << 40);
    hostile("model.safetensors", b, sizeof b, BATON_EFORMAT, "exceeds");
}
/* A safetensors file: the 8-byte header length, the JSON header, then `data` zero bytes of tensor data. */
static void hostile_safetensors(const char *name, const char *header, size_t data, const char *needle) {
    size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + data);
    ASSERT_TRUE(b != NULL);
    le64(b, hl);
    memcpy(b + 8, header, hl);
    hostile(name, b, 8 + hl + data, BATON_EFORMAT, needle);
    free(b);
}
TEST(ckpt_model_file_header_not_json) {
    hostile_safetensors("model.safetensors", "not json!", 0, "not a JSON object");
}
TEST(ckpt_optim_file_overlapping_offsets) {
    hostile_safetensors("optim.safetensors",
                        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                        12, "overlap");
}
TEST(ckpt_optim_file_out_of_range_offsets) {
    hostile_safetensors("optim.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", 8,
                        "out of range");
}
TEST(ckpt_model_file_size_disagrees_with_shape) {
    hostile_safetensors("model.safetensors",
                        "{\"fc1.bias\":{\"dtype\":\"F32\",\"shape\":[50],\"data_offsets\":[0,8]}}", 8, "disagree");
}
TEST(ckpt_model_file_truncated_then_recommitted) {
    /* the header promises 16 bytes of data; 5 are there */
    hostile_safetensors("model.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 5,
                        "truncated");
}

/* ---- mismatches -------------------------------------------------------------------------------------- */
TEST(ckpt_mismatched_model_shapes_leave_the_model_untouched) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    save_step(ckdir(), p, o, 10);
    baton_params *q = make_params(60);   /* fc1 has 60 rows now */
    baton_optim *u = make_optim(q, BATON_OPTIM_SGD);
    baton_ckpt_state st;
    ASSERT_EQ_INT(baton_ckpt_load(ckdir(), q, u, &st), BATON_EMISMATCH);
    ASSERT_CONTAINS(baton_last_error(), "model.safetensors");
    ASSERT_CONTAINS(baton_last_error(), "fc1.weight");
    for (size_t i = 0; i < baton_params_numel(q); i++) ASSERT_TRUE(baton_params_data(q)[i] == 0.0f);
    baton_optim_free(u);
    baton_params_free(q);
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(ckpt_other_optimizer_is_a_mismatch) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    save_step(ckdir(), p, o, 10);
    long step;
    ASSERT_EQ_INT(load_step(BATON_OPTIM_ADAMW, &step), BATON_EMISMATCH);
    ASSERT_CONTAINS(baton_last_error(), "optim.safetensors");
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(ckpt_save_reports_an_unwritable_directory) {
    baton_params *p = make_params(50);
    baton_optim *o = make_optim(p, BATON_OPTIM_SGD);
    baton_ckpt_state st;
    baton_ckpt_rank ranks[2];
    fill(p, o, 5, &st, ranks);
    char path[600];
    snprintf(path, sizeof path, "%s/file", th_tmpdir());
    put_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/file/ck", th_tmpdir());   /* under a regular file */
    ASSERT_EQ_INT(baton_ckpt_save(path, p, o, &st), BATON_EIO);
    ASSERT_CONTAINS(baton_last_error(), "file/ck");
    baton_optim_free(o);
    baton_params_free(p);
}

/* ---- SIGKILL during writes --------------------------------------------------------------------------- */
static _Noreturn void writer_loop(long from, int slow) {
    if (slow) setenv("BATON_TEST_CKPT_SLOW_US", slow == 1 ? "100" : "400", 1);
    else unsetenv("BATON_TEST_CKPT_SLOW_US");
    baton_params *p = make_params(120);   /* ~13k floats: 52 KB of parameters, 2 x 52 KB of adamw state */
    baton_optim *o = make_optim(p, BATON_OPTIM_ADAMW);
    for (long s = from;; s++) {
        baton_ckpt_state st;
        baton_ckpt_rank ranks[2];
        fill(p, o, s, &st, ranks);
        if (baton_ckpt_save(ckdir(), p, o, &st) < 0) {
            fprintf(stderr, "writer: %s\n", baton_last_error());
            _exit(3);
        }
    }
}

/* 1 if the kill left a step directory without COMMIT or a temporary file (it hit the middle of a write). */
static int left_torn(void) {
    DIR *d = opendir(ckdir());
    int torn = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "step-", 5)) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/COMMIT", ckdir(), e->d_name);
        if (!exists(path)) torn = 1;
        static const char *const tmps[] = {"model.safetensors.tmp", "optim.safetensors.tmp", "state.json.tmp", "COMMIT.tmp"};
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s/%s/%s", ckdir(), e->d_name, tmps[i]);
            if (exists(path)) torn = 1;
        }
    }
    if (d) closedir(d);
    return torn;
}

static int load_killed(long *step) {
    baton_params *p = make_params(120);
    baton_optim *o = make_optim(p, BATON_OPTIM_ADAMW);
    baton_ckpt_state st;
    int rc = baton_ckpt_load(ckdir(), p, o, &st);
    *step = rc == 0 ? st.step : -1;
    if (rc == 0) check_content(p, o, &st);
    baton_ckpt_state_free(&st);
    baton_optim_free(o);
    baton_params_free(p);
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each round forks a writer that continues from the newest checkpoint, waits until it has committed the next
 * step (so the run makes progress however slow fsync is on a loaded machine), then lets it run for a random
 * fraction of 1.5 checkpoint durations (as measured this round) and SIGKILLs it: the kill lands at a random
 * point of the following write. Writers alternate between fast writes and slow 4 KiB pieces. */
TEST_T(ckpt_writer_sigkilled_at_50_points_always_leaves_a_complete_checkpoint, 240) {
    unsigned seed = 12345;
    long last = -1;
    int torn = 0;
    for (int k = 0; k < 50; k++) {
        double t0 = now_s();
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) writer_loop(last + 1, k % 3);
        while (!exists(file_of(last + 1, "COMMIT")) && now_s() - t0 < 60) usleep(200);
        double dur = now_s() - t0;
        seed = seed * 1103515245u + 12345u;
        usleep((useconds_t)(1.5e6 * dur * (double)((seed >> 16) % 1000) / 1000.0));
        kill(pid, SIGKILL);
        int status;
        ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);   /* killed mid-loop, no writer error */
        torn += left_torn();
        long step;
        ASSERT_OK(load_killed(&step));   /* complete and verified, content checked against its step */
        ASSERT_TRUE(step > last);        /* at least the step seen committed this round */
        int committed;
        long newest;
        ASSERT_OK(baton_ckpt_scan(ckdir(), &committed, &newest));
        ASSERT_EQ_INT(newest, step);
        ASSERT_TRUE(committed >= 1 && committed <= BATON_CKPT_KEEP + 1);   /* +1: killed before pruning */
        last = step;
    }
    fprintf(stderr, "  50 kills: reached step %ld; %d kill(s) left a torn step directory or temporary file\n", last,
            torn);
    ASSERT_TRUE(torn >= 10);   /* many kills landed in the middle of a checkpoint */
}

TEST(ckpt_atomic_write_replaces_whole_files_only) {
    char path[600];
    snprintf(path, sizeof path, "%s/f", th_tmpdir());
    ASSERT_OK(baton__write_atomic(path, "old content", 11, BATON_FILE_DURABLE));
    ASSERT_OK(baton__write_atomic(path, "new", 3, BATON_FILE_DURABLE));
    void *buf;
    size_t len;
    ASSERT_OK(baton__read_file(path, 100, &buf, &len));
    ASSERT_EQ_INT(len, 3);
    ASSERT_TRUE(!memcmp(buf, "new", 3));
    free(buf);
    ASSERT_EQ_INT(baton__read_file(path, 2, &buf, &len), BATON_EFORMAT);
    snprintf(path, sizeof path, "%s/absent", th_tmpdir());
    ASSERT_EQ_INT(baton__read_file(path, 2, &buf, &len), BATON_ENOTFOUND);
    snprintf(path, sizeof path, "%s/no/such/dir/f", th_tmpdir());
    ASSERT_EQ_INT(baton__write_atomic(path, "x", 1, BATON_FILE_DURABLE), BATON_EIO);
    setenv("BATON_TEST_CKPT_SLOW_US", "lots", 1);
    snprintf(path, sizeof path, "%s/g", th_tmpdir());
    ASSERT_EQ_INT(baton__write_atomic(path, "x", 1, BATON_FILE_DURABLE), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "BATON_TEST_CKPT_SLOW_US");
    unsetenv("BATON_TEST_CKPT_SLOW_US");
}
