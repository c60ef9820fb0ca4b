/* The manifest batch: Arrow columns and their export (manbatch.h). */
#include "manbatch.h"

#include <stdlib.h>
#include <string.h>

/* The exported columns, in manifest.py's COLUMNS order, then `_part`: each
 * one's name, Arrow format and batch column. */
static const struct {
    const char *name, *format;
    int col;
} COLUMNS[MB_COLUMNS] = {
    {"round", "l", MB_ROUND},
    {"round_seq", "l", MB_ROUND_SEQ},
    {"seq", "l", MB_INT0 + ING_MI_SEQ},
    {"start_ns", "l", MB_START_NS},
    {"op_id", "U", MB_STR0 + ING_MS_OP_ID},
    {"op_name", "U", MB_STR0 + ING_MS_OP_NAME},
    {"op_type", "U", MB_STR0 + ING_MS_OP_TYPE},
    {"stage", "U", MB_STR0 + ING_MS_STAGE},
    {"io", "U", MB_STR0 + ING_MS_IO},
    {"index", "U", MB_STR0 + ING_MS_INDEX},
    {"dtype", "U", MB_STR0 + ING_MS_DTYPE},
    {"format", "U", MB_STR0 + ING_MS_FORMAT},
    {"shape", "U", MB_STR0 + ING_MS_SHAPE},
    {"count", "l", MB_INT0 + ING_MI_COUNT},
    {"max", "g", MB_DBL0 + ING_MD_MAX},
    {"min", "g", MB_DBL0 + ING_MD_MIN},
    {"mean", "g", MB_DBL0 + ING_MD_MEAN},
    {"norm", "g", MB_DBL0 + ING_MD_NORM},
    {"nan", "l", MB_INT0 + ING_MI_NAN},
    {"pinf", "l", MB_INT0 + ING_MI_PINF},
    {"ninf", "l", MB_INT0 + ING_MI_NINF},
    {"zero", "l", MB_INT0 + ING_MI_ZERO},
    {"stat_step", "g", MB_STAT_STEP},
    {"path", "U", MB_STR0 + ING_MS_PATH},
    {"bytes", "l", MB_INT0 + ING_MI_BYTES},
    {"hash", "U", MB_STR0 + ING_MS_HASH},
    {"alias", "U", MB_STR0 + ING_MS_ALIAS},
    {"status", "U", MB_STR0 + ING_MS_STATUS},
    {"note", "U", MB_STR0 + ING_MS_NOTE},
    {"time", "tsn:UTC", MB_INT0 + ING_MI_TIME},
    {"_part", "U", MB_PART},
};

static int is_string(int col)
{
    return col >= MB_STR0;
}

/* ing_man_head's columns may be null: they carry a validity bitmap. */
static int nullable(int col)
{
    return col >= MB_INT0 && col < MB_PART;
}

/* Room for cap rows in every column but the strings' bytes. */
static int grow(struct man_batch *b)
{
    size_t cap = b->cap ? 2 * b->cap : 1024;
    for (int c = 0; c < MB_COLUMNS; c++) {
        struct man_column *col = &b->col[c];
        struct bytes *fixed = is_string(c) ? &col->offsets : &col->data;
        if (!bytes_reserve(fixed, (cap + 1) * 8 - fixed->len))
            return -1;
        if (nullable(c) && !bytes_reserve(&col->valid, cap / 8 - col->valid.len))
            return -1;
    }
    b->cap = cap;
    return 0;
}

static void put_string(struct man_column *col, size_t row, const char *prefix,
                       size_t prefix_n, const char *s, size_t n)
{
    int64_t *offsets = (int64_t *)(void *)col->offsets.p;
    if (!row)
        offsets[0] = 0;
    bytes_put(&col->data, prefix, prefix_n);
    bytes_put(&col->data, s, n);
    offsets[row + 1] = (int64_t)col->data.len;
}

static void put_valid(struct man_column *col, size_t row, unsigned valid)
{
    unsigned char *bits = (unsigned char *)col->valid.p;
    if (!(row & 7))
        bits[row >> 3] = 0;
    bits[row >> 3] |= (unsigned char)((valid & 1) << (row & 7));
}

static void put_i64(struct man_column *col, size_t row, int64_t v)
{
    ((int64_t *)(void *)col->data.p)[row] = v;
}

int mb_add(struct man_batch *b, int64_t round, int64_t round_seq, const char *cells,
           size_t cells_n, const char *part, size_t part_n)
{
    ing_man_head head;
    if (cells_n < sizeof head || (b->n == b->cap && grow(b) < 0))
        return -1;
    memcpy(&head, cells, sizeof head);
    const size_t i = b->n;
    struct man_column *col = b->col;
    put_i64(&col[MB_ROUND], i, round);
    put_i64(&col[MB_ROUND_SEQ], i, round_seq);
    put_i64(&col[MB_START_NS], i, b->start_ns);
    ((double *)(void *)col[MB_STAT_STEP].data.p)[i] = 0.0;
    for (int k = 0; k < ING_MI_N; k++) {
        put_i64(&col[MB_INT0 + k], i, head.i[k]);
        put_valid(&col[MB_INT0 + k], i, head.valid >> k);
    }
    for (int k = 0; k < ING_MD_N; k++) {
        ((double *)(void *)col[MB_DBL0 + k].data.p)[i] = head.d[k];
        put_valid(&col[MB_DBL0 + k], i, head.valid >> (8 + k));
    }
    size_t at = sizeof head;
    for (int k = 0; k < ING_MS_N; k++) {
        uint32_t n;
        if (cells_n - at < sizeof n)
            return -1;
        memcpy(&n, cells + at, sizeof n);
        at += sizeof n;
        if (cells_n - at < n)
            return -1;
        unsigned valid = head.valid >> (12 + k) & 1;
        /* the manifest's path is under data/ */
        put_string(&col[MB_STR0 + k], i, "data/", k == ING_MS_PATH && valid ? 5 : 0,
                   cells + at, n);
        put_valid(&col[MB_STR0 + k], i, valid);
        at += n;
    }
    put_string(&col[MB_PART], i, "", 0, part, part_n);
    for (int k = MB_STR0; k < MB_COLUMNS; k++)
        if (col[k].data.oom)
            return -1;
    b->n++;
    return 0;
}

/* ---- export: Arrow's C data interface ---- */

/* An exported column owns its buffers; the struct array owns its children. */
struct owned_column {
    struct man_column col;
    const void *buffers[3];
};

struct owned_struct {
    struct ArrowArray *children[MB_COLUMNS];
    struct ArrowArray child[MB_COLUMNS];
    const void *buffers[1];
};

struct owned_schema {
    struct ArrowSchema *children[MB_COLUMNS];
    struct ArrowSchema child[MB_COLUMNS];
};

static void release_column(struct ArrowArray *a)
{
    struct owned_column *o = a->private_data;
    bytes_free(&o->col.data);
    bytes_free(&o->col.offsets);
    bytes_free(&o->col.valid);
    free(o);
    a->release = NULL;
}

static void release_struct(struct ArrowArray *a)
{
    struct owned_struct *o = a->private_data;
    for (int c = 0; c < MB_COLUMNS; c++)
        if (o->child[c].release) /* not moved out by the consumer */
            o->child[c].release(&o->child[c]);
    free(o);
    a->release = NULL;
}

static void release_child_schema(struct ArrowSchema *s)
{
    s->release = NULL; /* its strings are static */
}

static void release_schema(struct ArrowSchema *s)
{
    struct owned_schema *o = s->private_data;
    for (int c = 0; c < MB_COLUMNS; c++)
        if (o->child[c].release)
            o->child[c].release(&o->child[c]);
    free(o);
    s->release = NULL;
}

int mb_export(struct man_batch *b, struct ArrowSchema *schema, struct ArrowArray *array)
{
    struct owned_schema *os = calloc(1, sizeof *os);
    struct owned_struct *oa = calloc(1, sizeof *oa);
    struct owned_column *oc[MB_COLUMNS] = {0};
    int ok = os && oa;
    for (int c = 0; ok && c < MB_COLUMNS; c++)
        ok = (oc[c] = calloc(1, sizeof *oc[c])) != NULL;
    if (!ok) {
        for (int c = 0; c < MB_COLUMNS; c++)
            free(oc[c]);
        free(os);
        free(oa);
        return -1;
    }
    /* an empty batch's buffers: one offset (0), no values */
    static const int64_t none[1] = {0};
    for (int c = 0; c < MB_COLUMNS; c++) {
        const int from = COLUMNS[c].col;
        struct owned_column *o = oc[c];
        o->col = b->col[from];
        memset(&b->col[from], 0, sizeof b->col[from]);
        o->buffers[0] = nullable(from) && b->n ? o->col.valid.p : NULL;
        if (is_string(from)) {
            o->buffers[1] = b->n ? (const void *)o->col.offsets.p : none;
            o->buffers[2] = o->col.data.p ? o->col.data.p : (const void *)none;
        } else {
            o->buffers[1] = b->n ? (const void *)o->col.data.p : none;
        }
        oa->child[c] = (struct ArrowArray){
            .length = (int64_t)b->n,
            .null_count = nullable(from) ? -1 : 0,
            .n_buffers = is_string(from) ? 3 : 2,
            .buffers = o->buffers,
            .release = release_column,
            .private_data = o,
        };
        oa->children[c] = &oa->child[c];
        os->child[c] = (struct ArrowSchema){
            .format = COLUMNS[c].format,
            .name = COLUMNS[c].name,
            .flags = nullable(from) ? 2 : 0, /* ARROW_FLAG_NULLABLE */
            .release = release_child_schema,
        };
        os->children[c] = &os->child[c];
    }
    oa->buffers[0] = NULL;
    *array = (struct ArrowArray){
        .length = (int64_t)b->n,
        .n_buffers = 1,
        .n_children = MB_COLUMNS,
        .buffers = oa->buffers,
        .children = oa->children,
        .release = release_struct,
        .private_data = oa,
    };
    *schema = (struct ArrowSchema){
        .format = "+s",
        .name = "",
        .n_children = MB_COLUMNS,
        .children = os->children,
        .release = release_schema,
        .private_data = os,
    };
    b->n = b->cap = 0;
    return 0;
}

void mb_free(struct man_batch *b)
{
    for (int c = 0; c < MB_COLUMNS; c++) {
        bytes_free(&b->col[c].data);
        bytes_free(&b->col[c].offsets);
        bytes_free(&b->col[c].valid);
    }
    b->n = b->cap = 0;
}
