/*
 * e2e/ibcast/tally.c: ibcast_e2e's own tally of what it did (counted at the verbs calls,
 * never inside the hook wrappers) and its JSON for e2e/check.py, with the library's live
 * snapshot (rcclTelemetrySwCapture) taken after every comm closed. Separate because it is
 * the program's output.
 */
#include "ibcast.h"

struct Tally T;

void tally_size(uint64_t s) {
    for (int i = 0; i < T.nsizes; i++)
        if (T.size_val[i] == s) { T.size_cnt[i]++; return; }
    if (T.nsizes == MAX_SIZES) die("too many distinct WQE sizes");
    T.size_val[T.nsizes] = s;
    T.size_cnt[T.nsizes++] = 1;
}

/* ibv_devinfo's form: 8 groups of 4 lower-case hex digits */
static const char *gid_str(const uint8_t *g) {
    static char b[4][40];
    static int k;
    char *o = b[k++ % 4];
    for (int i = 0; i < 8; i++) sprintf(o + 5 * i, "%02x%02x%s", g[2 * i], g[2 * i + 1], i < 7 ? ":" : "");
    return o;
}

void write_tally(const char *path, const char *mode, int rank, int nreq, uint64_t ms) {
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write tally %s: %s", path, strerror(errno));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\n  \"program\": \"ibcast_e2e\", \"mode\": \"%s\", \"rank\": %d, \"host_name\": \"%s\", \"process_id\": %d,\n",
            mode, rank, host, (int)getpid());
    fprintf(f, "  \"requests_per_comm\": %d, \"elapsed_ms\": %llu, \"mtu\": %u, \"split_bytes\": %d,\n", nreq,
            (unsigned long long)ms, mtu_bytes, SPLIT_BYTES);
    fprintf(f, "  \"error_probe\": %s, \"expect_errors\": %s, \"errors_seen\": %llu, \"qp_timeout\": %d, \"retry_cnt\": %d, \"rnr_retry\": %d, "
               "\"rnr_after\": %d,\n",
            error_probe ? "true" : "false", expect_errors ? "true" : "false", (unsigned long long)errors_seen, qp_timeout, retry_cnt, rnr_retry, rnr_after);
    const char *ls = getenv("RCCL_TELEMETRY_LATENCY_SAMPLE");
    fprintf(f, "  \"latency_sample_env\": %s%s%s,\n", ls ? "\"" : "", ls ? ls : "null", ls ? "\"" : "");
    fprintf(f, "  \"traffic\": {\"payload_bytes_checked\": %llu, \"payload_errors\": %llu, \"sends_completed\": %llu, "
               "\"recv_completions\": %llu, \"request_pkts_sent_min\": %llu, \"request_pkts_received_min\": %llu, "
               "\"tokens_sampled\": %llu, \"tokens_unsampled\": %llu},\n",
            (unsigned long long)T.payload_checked, (unsigned long long)T.payload_errors, (unsigned long long)T.sends,
            (unsigned long long)T.recv_completions, (unsigned long long)T.send_pkts_min,
            (unsigned long long)T.recv_pkts_min, (unsigned long long)T.tokens_sampled,
            (unsigned long long)T.tokens_unsampled);
    fprintf(f, "  \"gid\": \"%s\", \"gid_index\": %d, \"lid\": %u, \"set_peer_available\": %s,\n", gid_str(my_gid.raw),
            gid_index, my_lid, "true");
    fprintf(f, "  \"devices\": [{\n    \"device_id\": %d, \"roce_device\": \"%s\",\n", DEV, ibv_get_device_name(ctx->device));
    int nuntracked = 0;
    for (int i = 0; i < T.nch; i++) nuntracked += T.ch[i].requested_slots - T.ch[i].granted_slots;
    fprintf(f, "    \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"num_cq_errors\": %llu, \"cq_poll_count\": %llu,\n",
            (unsigned long long)T.tx_bytes, (unsigned long long)T.rx_bytes, (unsigned long long)T.cq_errors,
            (unsigned long long)T.cq_polls);
    fprintf(f, "    \"num_channels\": %d, \"active_channels\": %d, \"num_qp_untracked\": %d,\n", T.nch, T.nch, nuntracked);
    fprintf(f, "    \"wqe_sizes\": [");
    for (int i = 0; i < T.nsizes; i++)
        fprintf(f, "%s[%llu, %llu]", i ? ", " : "", (unsigned long long)T.size_val[i], (unsigned long long)T.size_cnt[i]);
    fprintf(f, "],\n    \"channels\": [\n");
    for (int i = 0; i < T.nch; i++) {
        struct ChTally *c = &T.ch[i];
        int nd = 0, nc = 0;
        for (int q = 0; q < QPS_PER_CH; q++)
            if (c->qp[q].used) { if (c->qp[q].is_data) nd++; else nc++; }
        fprintf(f, "      {\"id\": %d, \"num_req_completed\": %llu, \"num_data_qp\": %d, \"num_cts_qp\": %d, "
                   "\"num_qp_untracked\": %d, \"index_forms\": %s, \"link\": %d, \"queue_pairs\": [\n",
                c->id, (unsigned long long)c->req_completed, nd, nc, c->requested_slots - c->granted_slots,
                chans[i].index_forms ? "true" : "false", chans[i].link);
        int first = 1;
        for (int q = 0; q < QPS_PER_CH; q++) {
            struct QpTally *t = &c->qp[q];
            if (!t->used) continue;
            fprintf(f, "%s        {\"id\": %d, \"role\": \"%s\", \"num_wqe_sent\": %llu, \"num_recv_wqe\": %llu, "
                       "\"num_wqe_rcvd\": %llu, \"num_wqe_completed\": %llu, \"num_wqe_sampled\": %llu, "
                       "\"num_cts_sent\": %llu, \"num_cts_sent_signalled\": %llu, \"num_cts_sent_unsignalled\": %llu, "
                       "\"num_slot_miss\": %llu, \"num_write_wqe\": %llu, \"num_write_imm_wqe\": %llu, "
                       "\"request_pkts_sent_min\": %llu, \"qp_num\": %u, \"peer_qp_num\": %u, \"peer_lid\": %u, "
                       "\"peer_gid\": \"%s\", \"peer_set\": %s, \"traffic_class\": %d, \"first_error_code\": %d, "
                       "\"cq_errors_by_code\": {",
                    first ? "" : ",\n", q, t->is_data ? "data" : "cts", (unsigned long long)t->wqe_sent,
                    (unsigned long long)t->recv_wqe, (unsigned long long)t->wqe_rcvd,
                    (unsigned long long)t->wqe_completed, (unsigned long long)t->wqe_sampled,
                    (unsigned long long)(t->cts_sig + t->cts_unsig), (unsigned long long)t->cts_sig,
                    (unsigned long long)t->cts_unsig, (unsigned long long)t->slot_miss, (unsigned long long)t->write,
                    (unsigned long long)t->write_imm, (unsigned long long)t->pkts_out, t->qp_num, t->peer_qp_num,
                    t->peer_lid, gid_str(t->peer_gid), t->peer_set ? "true" : "false", t->tclass, t->first_error);
            for (int s = 0, n = 0; s < 32; s++)
                if (t->errors[s]) fprintf(f, "%s\"%d\": %llu", n++ ? ", " : "", s, (unsigned long long)t->errors[s]);
            fprintf(f, "}}");
            first = 0;
        }
        fprintf(f, "\n      ]}%s\n", i + 1 < T.nch ? "," : "");
    }
    fprintf(f, "    ]\n  }],\n");
    /* the library's live snapshot, taken after every comm closed */
    RcclTelemetrySwSnapshot snap[RCCL_TELEMETRY_MAX_DEVS];
    memset(snap, 0, sizeof snap);
    int ns = rcclTelemetrySwCapture(snap, RCCL_TELEMETRY_MAX_DEVS);
    fprintf(f, "  \"sw_capture\": [");
    for (int i = 0; i < ns && i < RCCL_TELEMETRY_MAX_DEVS; i++) {
        RcclTelemetrySwSnapshot *s = &snap[i];
        fprintf(f, "%s{\"device_id\": %d, \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"num_cq_errors\": %llu, "
                   "\"wqe_sent\": %llu, \"recv_wqe\": %llu, \"wqe_rcvd\": %llu, \"wqe_completed\": %llu, "
                   "\"wqe_sampled\": %llu, \"wqe_completion_ns_min\": %lld, \"wqe_completion_ns_max\": %lld, "
                   "\"wqe_completion_histogram\": [",
                i ? ", " : "", s->device_id, (unsigned long long)s->tx_bytes, (unsigned long long)s->rx_bytes,
                (unsigned long long)s->num_cq_errors, (unsigned long long)s->wqe_sent,
                (unsigned long long)s->recv_wqe, (unsigned long long)s->wqe_rcvd,
                (unsigned long long)s->wqe_completed, (unsigned long long)s->wqe_sampled,
                (long long)s->wqe_completion_ns_min, (long long)s->wqe_completion_ns_max);
        for (int b = 0; b < RCCL_TELEMETRY_HISTOGRAM_SIZE; b++)
            fprintf(f, "%s%llu", b ? ", " : "", (unsigned long long)s->wqe_completion_histogram[b]);
        fprintf(f, "]}");
    }
    fprintf(f, "],\n  \"telemetry_on\": %d\n}\n", rcclTelemetryOn());
    if (fclose(f)) die("writing tally %s failed", path);
}
