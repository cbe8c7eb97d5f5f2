// ShardSpec: gather, scatterBack and wholeShape at tp 1, 2 and 4 on local process groups, for
// every layout a port can have. Each rank's shard is cut from an independently built whole tensor
// by the layout's own rule (written out here, not taken from ShardSpec or HeadLayout), and every
// result is compared with that whole.
#include <QtTest>

#include <functional>

#include "common/run_ranks.h"
#include "common/tensor_checks.h"
#include "core/parallel/head_layout.h"
#include "core/parallel/shard_spec.h"

using namespace shardscope;

namespace {

// Distinct values everywhere, so a misplaced column or row is seen.
at::Tensor values(std::vector<int64_t> shape, double offset = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (at::arange(n, at::kFloat) + offset).view(shape);
}

// A layout under test: the spec, each rank's shard of a whole, and the whole a read returns.
struct Layout {
  ShardSpec spec;
  std::function<at::Tensor(const at::Tensor& whole, int rank, int tp)> shardOf;
  std::vector<int64_t> wholeShape;
};

// Checks gather on every rank, wholeShape, and that a block's write (into the gathered value, then
// scattered back as the interleaver does) leaves each rank holding its shard of the edited whole.
void checkLayout(const Layout& l, int tp) {
  const at::Tensor whole = values(l.wholeShape);
  const at::Tensor edited = values(l.wholeShape, 1000);
  std::vector<at::Tensor> gathered(static_cast<size_t>(tp)), written(static_cast<size_t>(tp)),
      locals(static_cast<size_t>(tp));
  const auto errors = test::runRanks(tp, [&](int r, ProcessGroup& g) {
    at::Tensor local = l.shardOf(whole, r, tp).clone();
    locals[size_t(r)] = local.clone();
    at::Tensor w = gather(local, l.spec, g);
    gathered[size_t(r)] = w.clone();
    w.copy_(edited);
    scatterBack(local, w, l.spec, g);
    written[size_t(r)] = local;
  });
  for (int r = 0; r < tp; ++r) {
    QVERIFY2(errors[size_t(r)].empty(), errors[size_t(r)].c_str());
    QVERIFY2(at::equal(gathered[size_t(r)], whole), ("rank " + std::to_string(r)).c_str());
    QCOMPARE(wholeShape(locals[size_t(r)].sizes().vec(), l.spec, tp), l.wholeShape);
    QVERIFY2(at::equal(written[size_t(r)], l.shardOf(edited, r, tp)),
             ("write-back on rank " + std::to_string(r)).c_str());
  }
}

}  // namespace

class TestShardSpec : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void layouts_data() {
    QTest::addColumn<int>("tp");
    for (int tp : {1, 2, 4}) QTest::addRow("tp%d", tp) << tp;
  }

  void replicatedIsTheLocalTensor_data() { layouts_data(); }
  void replicatedIsTheLocalTensor() {
    QFETCH(int, tp);
    checkLayout({ShardSpec::whole(), [](const at::Tensor& w, int, int) { return w; }, {3, 8}}, tp);
    std::vector<char> same(static_cast<size_t>(tp));
    test::runRanks(tp, [&](int r, ProcessGroup& g) {
      at::Tensor local = values({2, 3});
      same[size_t(r)] = gather(local, ShardSpec::whole(), g).is_same(local);
    });
    for (char s : same) QVERIFY(s);  // writes land in the model's tensor directly
  }

  void splitAlongLastDimension_data() { layouts_data(); }
  void splitAlongLastDimension() {
    QFETCH(int, tp);
    const auto columns = [](const at::Tensor& w, int r, int tp) {
      const int64_t c = w.size(1) / tp;
      return w.narrow(1, r * c, c);
    };
    checkLayout({ShardSpec::split(ShardKind::Column), columns, {3, 8}}, tp);
    checkLayout({ShardSpec::split(ShardKind::RowInput, 1), columns, {5, 16}}, tp);
  }

  // k_norm's input [T, kv heads, d] when tp > n_kv: ranks r and r+1 hold the same KV head; the
  // read shows each KV head once and a write lands in every copy.
  void headSplitWithReplicasShowsEachHeadOnce_data() { layouts_data(); }
  void headSplitWithReplicasShowsEachHeadOnce() {
    QFETCH(int, tp);
    const int64_t kvHeads = 2;
    const int replicas = tp > kvHeads ? int(tp / kvHeads) : 1;
    const auto heads = [replicas](const at::Tensor& w, int r, int tp) {
      const int64_t perRank = std::max<int64_t>(w.size(1) / tp, 1);
      return w.narrow(1, (r / replicas) * perRank, perRank);
    };
    checkLayout({ShardSpec::split(ShardKind::Head, 1, replicas), heads, {3, kvHeads, 4}}, tp);
  }

  // DCPGroupColumnParallelLinear's output at dcp 1, 2 and 4 (dividing tp): tp / dcp column
  // shards, shard g on ranks g*dcp .. g*dcp + dcp - 1; the read drops the group replicas and a
  // write lands on every replica.
  void dcpGroupDropsReplicas_data() { layouts_data(); }
  void dcpGroupDropsReplicas() {
    QFETCH(int, tp);
    for (int dcp = 1; dcp <= tp; dcp *= 2) {
      const auto group = [dcp](const at::Tensor& w, int r, int tp) {
        const int64_t c = w.size(1) / (tp / dcp);
        return w.narrow(1, (r / dcp) * c, c);
      };
      checkLayout({ShardSpec::split(ShardKind::DcpGroup, -1, dcp), group, {3, 8}}, tp);
    }
  }

  // qkv_proj's output: each rank holds [q heads | its KV heads | its v heads]; the read is the
  // rank shards concatenated as they are ([q_0 k_0 v_0 | q_1 k_1 v_1 ...]), KV copies included.
  // HeadLayout's columns of every head in it must be that head of the unfused q, k and v.
  void fusedQkvWithKvReplicas_data() { layouts_data(); }
  void fusedQkvWithKvReplicas() {
    QFETCH(int, tp);
    const int64_t T = 3, nq = 4, nkv = 2, d = 2;
    const at::Tensor q = values({T, nq * d}), k = values({T, nkv * d}, 500),
                     v = values({T, nkv * d}, 900);
    const int64_t qPerRank = nq / tp, kvPerRank = std::max<int64_t>(nkv / tp, 1);
    const int replicas = tp > nkv ? int(tp / nkv) : 1;
    const auto rankShard = [&](int r) {
      const int64_t kv0 = (r / replicas) * kvPerRank;  // the first KV head rank r holds
      return at::cat({q.narrow(1, r * qPerRank * d, qPerRank * d),
                      k.narrow(1, kv0 * d, kvPerRank * d), v.narrow(1, kv0 * d, kvPerRank * d)},
                     1);
    };
    std::vector<at::Tensor> shards;
    for (int r = 0; r < tp; ++r) shards.push_back(rankShard(r));
    const at::Tensor whole = at::cat(shards, 1);
    const ShardSpec spec = ShardSpec::fused({qPerRank * d, kvPerRank * d, kvPerRank * d});
    std::vector<at::Tensor> gathered(static_cast<size_t>(tp)), written(static_cast<size_t>(tp));
    const at::Tensor edited = whole + 1000;
    const auto errors = test::runRanks(tp, [&](int r, ProcessGroup& g) {
      at::Tensor local = shards[size_t(r)].clone();
      at::Tensor w = gather(local, spec, g);
      gathered[size_t(r)] = w.clone();
      w.copy_(edited);
      scatterBack(local, w, spec, g);
      written[size_t(r)] = local;
    });
    for (int r = 0; r < tp; ++r) {
      QVERIFY2(errors[size_t(r)].empty(), errors[size_t(r)].c_str());
      QVERIFY(at::equal(gathered[size_t(r)], whole));
      QVERIFY(at::equal(written[size_t(r)], shards[size_t(r)] + 1000));
    }
    QCOMPARE(wholeShape({T, (qPerRank + 2 * kvPerRank) * d}, spec, tp),
             (std::vector<int64_t>{T, whole.size(1)}));
    const HeadLayout layout(nq, nkv, d, tp);
    QCOMPARE(layout.gatheredQkvColumns(), whole.size(1));
    const auto columns = [&](HeadColumns c) { return whole.narrow(1, c.start, c.size); };
    for (int64_t h = 0; h < nq; ++h)
      QVERIFY(at::equal(columns(layout.qkvColumns(HeadPart::Query, h)), q.narrow(1, h * d, d)));
    for (int64_t h = 0; h < nkv; ++h) {
      QVERIFY(at::equal(columns(layout.qkvColumns(HeadPart::Key, h)), k.narrow(1, h * d, d)));
      QVERIFY(at::equal(columns(layout.qkvColumns(HeadPart::Value, h)), v.narrow(1, h * d, d)));
    }
    // rotary_emb's k keeps every rank's KV heads: query head h reads its own rank's copy of the
    // KV head it attends with (h / (nq / nkv)).
    std::vector<at::Tensor> kShards;
    for (int r = 0; r < tp; ++r)
      kShards.push_back(rankShard(r).narrow(1, qPerRank * d, kvPerRank * d));
    const at::Tensor rotaryK = at::cat(kShards, 1);
    for (int64_t h = 0; h < nq; ++h) {
      const HeadColumns c = layout.rotaryKeyColumnsFor(h);
      QVERIFY(at::equal(rotaryK.narrow(1, c.start, c.size), k.narrow(1, (h / (nq / nkv)) * d, d)));
    }
  }

  // vLLM leaves fused MoE experts a per-rank partial sum: a read all-reduces; a write is divided
  // by the group size so that the block's own reduce sums it exactly once.
  void partialSumReadsTheSumAndWritesOnce_data() { layouts_data(); }
  void partialSumReadsTheSumAndWritesOnce() {
    QFETCH(int, tp);
    const auto part = [](int r) { return values({2, 3}) * (r + 1); };
    at::Tensor sum = at::zeros({2, 3});
    for (int r = 0; r < tp; ++r) sum += part(r);
    const at::Tensor edited = values({2, 3}, -50) * 3;
    std::vector<at::Tensor> gathered(static_cast<size_t>(tp)), reduced(static_cast<size_t>(tp));
    std::vector<char> untouched(static_cast<size_t>(tp));
    const auto errors = test::runRanks(tp, [&](int r, ProcessGroup& g) {
      at::Tensor local = part(r);
      at::Tensor w = gather(local, ShardSpec::partialSum(), g);
      gathered[size_t(r)] = w.clone();
      untouched[size_t(r)] = at::equal(local, part(r));  // a read leaves the model's tensor alone
      w.copy_(edited);
      scatterBack(local, w, ShardSpec::partialSum(), g);
      g.allReduceSum(local);  // the block's own reduce
      reduced[size_t(r)] = local;
    });
    for (int r = 0; r < tp; ++r) {
      QVERIFY2(errors[size_t(r)].empty(), errors[size_t(r)].c_str());
      QVERIFY(at::equal(gathered[size_t(r)], sum));
      QVERIFY(untouched[size_t(r)]);
      QVERIFY(test::closeToScale(reduced[size_t(r)], edited));
    }
    QCOMPARE(wholeShape({2, 3}, ShardSpec::partialSum(), tp), (std::vector<int64_t>{2, 3}));
  }

  // The vocabulary padded to 12 and split: a read trims the padding, a write leaves it alone.
  void vocabularyPaddingIsTrimmed_data() { layouts_data(); }
  void vocabularyPaddingIsTrimmed() {
    QFETCH(int, tp);
    const int64_t vocab = 10, padded = 12;
    const auto shardOf = [&](const at::Tensor& w, int r, int tp) {
      const at::Tensor full = at::cat({w, at::full({w.size(0), padded - vocab}, -7.0f)}, 1);
      const int64_t c = padded / tp;
      return full.narrow(1, r * c, c);
    };
    checkLayout({ShardSpec::padded(ShardKind::Vocab, -1, vocab), shardOf, {2, vocab}}, tp);
  }
};

QTEST_GUILESS_MAIN(TestShardSpec)
#include "tst_shard_spec.moc"
