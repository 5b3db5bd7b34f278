/* Decode and verify steps as CUDA graphs: per bucket of sequences, token rows
 * a sequence (struct step_shape's stride) and in-flight slot, the whole step
 * and the forward alone (its sampling queued eagerly after it), each captured
 * once and replayed. Their kernels read every per-step value (tokens,
 * positions, block tables, attention tiles, sampling parameters) from the
 * slot's step buffer, so one capture serves every step of its shape. */

#include "cuda_internal.h"

/* Whether verify graphs of `bucket` sequences exist: captured at start-up for
 * the sequences that may draft together, within the draft rows and the tokens
 * of one step. */
bool cuda_verify_graph_fits(const struct cuda_backend *cb, int bucket)
{
    return cb->use_graphs && cb->verify_stride > 1 && bucket <= VERIFY_GRAPH_MAX_SEQS &&
           bucket <= cb->base.max_seqs &&
           bucket * (cb->verify_stride - 1) <= FOLIO_MAX_DRAFT_ROWS &&
           bucket * cb->verify_stride <= cb->base.max_num_tokens;
}

/* Replays the graph of shape sh for in-flight slot `slot` (cb->d_meta is
 * that slot's buffer; num_tiles: the attention's query tiles, -1 for the
 * decode kernel): the shape's first call runs the whole step eagerly and the
 * first call of each graph after that captures it (cuda_capture_graphs makes
 * these calls for every shape at start-up). */
int cuda_run_graph(struct cuda_backend *cb, const struct step_shape *sh, int num_tiles, int slot,
                   bool forward_only, const struct step_layout *l, char *err, size_t errlen)
{
    struct graph_entry *g = NULL;
    for (int i = 0; i < cb->num_graphs; i++)
        if (cb->graphs[i].bucket == sh->s_rows && cb->graphs[i].stride == sh->stride)
            g = &cb->graphs[i];
    if (!g) {
        if (cb->num_graphs == NUM_GRAPH_BUCKETS) {
            snprintf(err, errlen, "cuda backend: too many graph buckets");
            return -1;
        }
        /* The first step of a shape runs eagerly with the same padded shapes:
         * modules load, cuBLASLt picks its algorithms, and nothing of that
         * happens inside the capture. */
        g = &cb->graphs[cb->num_graphs++];
        *g = (struct graph_entry){.bucket = sh->s_rows, .stride = sh->stride};
        cb->defer_sample = forward_only;
        int rc = cuda_forward(cb, l, sh->t_rows, sh->s_rows, sh->r_rows, num_tiles, err, errlen);
        cb->defer_sample = false;
        return rc;
    }
    const int f = forward_only ? 1 : 0;
    if (!g->captured[f][slot]) {
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal));
        cb->defer_sample = forward_only;
        int rc = cuda_forward(cb, l, sh->t_rows, sh->s_rows, sh->r_rows, num_tiles, err, errlen);
        cb->defer_sample = false;
        cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
        if (rc != 0)
            return -1;
        if (e != cudaSuccess) {
            snprintf(err, errlen,
                     "cuda backend: capturing the graph of %d sequences of %d rows: %s", sh->s_rows,
                     sh->stride, cudaGetErrorString(e));
            return -1;
        }
        e = cudaGraphInstantiate(&g->exec[f][slot], graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(e);
        g->captured[f][slot] = true;
    }
    CUDA_CHECK(cudaGraphLaunch(g->exec[f][slot], cb->stream));
    return 0;
}
