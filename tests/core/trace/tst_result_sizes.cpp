// The memory budget asks for a tensor op's result before the op runs (result_sizes.h): each
// prediction here is checked against the bytes of the result ATen then makes, and operands that
// do not fit together predict 0 where ATen raises its own error.
#include <QtTest/QtTest>

#include <string>
#include <vector>

#include "core/trace/result_sizes.h"

using namespace shardscope::trace;

namespace {

using Shape = std::vector<int64_t>;

at::Tensor ones(const Shape& s, at::ScalarType dtype = at::kFloat) {
  return at::ones(s, at::TensorOptions().dtype(dtype));
}

std::string shown(const Shape& s) {
  std::string out = "(";
  for (const int64_t n : s) out += std::to_string(n) + ",";
  return out + ")";
}

}  // namespace

class TestResultSizes : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void broadcastPredictsWhatATenMakes() {
    struct Case {
      Shape x, y, z;
      at::ScalarType dtype;
    };
    const std::vector<Case> cases = {
        {{3, 1}, {1, 4}, {}, at::kFloat},     {{2, 3, 1}, {4}, {}, at::kFloat},
        {{5}, {}, {}, at::kDouble},           {{0, 3}, {1, 3}, {}, at::kFloat},
        {{2, 1, 4}, {3, 1}, {1}, at::kFloat}, {{7, 1}, {1, 6}, {7, 6}, at::kBool}};
    for (const Case& c : cases) {
      const at::Tensor x = ones(c.x, c.dtype), y = ones(c.y, c.dtype);
      const bool three = !c.z.empty();
      const at::Tensor z = three ? ones(c.z, c.dtype) : at::Tensor();
      const at::Tensor made = three ? at::where(z.to(at::kBool), x, y) : x * y;
      const std::string what = shown(c.x) + " " + shown(c.y) + " " + shown(c.z);
      QVERIFY2(broadcastBytes(x, y, made.scalar_type(), z) == int64_t(made.nbytes()), what.c_str());
    }
    QCOMPARE(broadcastBytes(ones({3}), ones({4}), at::kFloat), int64_t(0));
    QVERIFY_THROWS_EXCEPTION(std::exception, ones({3}) * ones({4}));
  }

  void matmulPredictsWhatATenMakes() {
    const std::vector<std::pair<Shape, Shape>> cases = {{{3}, {3}},
                                                        {{2, 5, 3}, {3}},
                                                        {{4, 3}, {3, 6}},
                                                        {{2, 4, 5, 3}, {2, 4, 3, 6}},
                                                        {{100000, 1}, {1, 3}},
                                                        {{0, 3}, {3, 2}},
                                                        {{7, 2, 3}, {3, 5}}};
    for (const auto& [a, b] : cases) {
      const at::Tensor x = ones(a), y = ones(b);
      QVERIFY2(matmulBytes(x, y) == int64_t(at::matmul(x, y).nbytes()),
               (shown(a) + " @ " + shown(b)).c_str());
    }
    // Operands whose batch dims broadcast are copied to the whole batch first: here x to
    // (2, 4, 5, 3) and y to (2, 4, 3, 6), beside the (2, 4, 5, 6) result.
    QCOMPARE(matmulBytes(ones({2, 1, 5, 3}), ones({4, 3, 6})),
             int64_t(at::matmul(ones({2, 1, 5, 3}), ones({4, 3, 6})).nbytes()) +
                 int64_t(sizeof(float)) * (2 * 4 * 5 * 3 + 2 * 4 * 3 * 6));
    // (n, 1, 1, k) @ (1, m, k, 1): a small result, two copies of n * m * k.
    QCOMPARE(matmulBytes(ones({100, 1, 1, 1000}), ones({1, 100, 1000, 1})),
             int64_t(sizeof(float)) * (100 * 100 + 2 * 100 * 100 * 1000));
    // A vector against a batch: the vector copied once a batch entry (1.13's matmul).
    QCOMPARE(matmulBytes(ones({3}), ones({2, 3, 4})), int64_t(sizeof(float)) * (2 * 4 + 2 * 3));
    for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{
             {{3}, {4}}, {{2, 3}, {4, 5}}, {{2, 2, 3}, {3, 3, 4}}, {{}, {3}}}) {
      QCOMPARE(matmulBytes(ones(a), ones(b)), int64_t(0));
      QVERIFY_THROWS_EXCEPTION(std::exception, at::matmul(ones(a), ones(b)));
    }
  }

  void einsumPredictsWhatATenMakes() {
    struct Case {
      std::string equation;
      std::vector<Shape> shapes;
    };
    const std::vector<Case> cases = {{"i,j->ij", {{3}, {5}}},
                                     {"i,j", {{3}, {5}}},
                                     {"ij,jk", {{3, 4}, {4, 2}}},
                                     {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
                                     {"ii->i", {{4, 4}}},
                                     {"ii", {{4, 4}}},
                                     {"ij->", {{3, 4}}},
                                     {"ji", {{3, 4}}},
                                     {"...ij,...jk->...ik", {{2, 3, 4, 5}, {3, 5, 6}}},
                                     {"i...->...", {{3, 4, 5}}},
                                     {"...ij", {{2, 3, 4}}},
                                     {"b i j , b j k -> b i k", {{2, 3, 4}, {2, 4, 5}}},
                                     {"Ab,bC->AC", {{2, 3}, {3, 4}}}};
    for (const Case& c : cases) {
      std::vector<at::Tensor> ops;
      for (const Shape& s : c.shapes) ops.push_back(ones(s));
      QVERIFY2(einsumBytes(c.equation, ops) == int64_t(at::einsum(c.equation, ops).nbytes()),
               c.equation.c_str());
    }
    // Equations that do not fit their operands: 0, and ATen's own error.
    for (const Case& c : std::vector<Case>{
             {"ij,jk", {{3, 4}}}, {"ijk", {{3, 4}}}, {"i->j", {{3}}}, {"i#", {{3, 4}}}}) {
      std::vector<at::Tensor> ops;
      for (const Shape& s : c.shapes) ops.push_back(ones(s));
      QVERIFY2(einsumBytes(c.equation, ops) == 0, c.equation.c_str());
      QVERIFY_THROWS_EXCEPTION(std::exception, at::einsum(c.equation, ops));
    }
  }

  void catAndStackAskForTheWidestDtype() {
    const std::vector<at::Tensor> parts = {ones({2, 3}), ones({4, 3}, at::kDouble), ones({1, 3})};
    QCOMPARE(concatenatedBytes(parts), int64_t(at::cat(parts).nbytes()));
    const std::vector<at::Tensor> same = {ones({2, 3}), ones({2, 3}, at::kHalf)};
    QCOMPARE(concatenatedBytes(same), int64_t(at::stack(same).nbytes()));
    // long and float32 promote to float32, not to the wider int64
    const std::vector<at::Tensor> mixed = {ones({3, 2}, at::kLong), ones({3, 2})};
    QCOMPARE(concatenatedBytes(mixed), int64_t(at::cat(mixed).nbytes()));
  }

  // ATen contracts einsum's operands left to right, holding what a later operand still needs:
  // 'i,j,j->i' holds an (i, j) product before the last operand sums j away.
  void einsumAsksForItsLargestIntermediate() {
    const std::vector<at::Tensor> x = {ones({12}), ones({12}), ones({12})};
    QCOMPARE(einsumBytes("i,j,j->i", x), int64_t(12 * 12 * 4));
    QCOMPARE(einsumBytes("i,i,j->j", x), int64_t(12 * 4));  // i is summed before j comes
    const std::vector<at::Tensor> mixed = {ones({3}, at::kHalf), ones({5})};
    QCOMPARE(einsumBytes("i,j->ij", mixed), int64_t(at::einsum("i,j->ij", mixed).nbytes()));
  }

  // A reshape or flatten asks for nothing where torch gives a view, and for the copy otherwise.
  void reshapeAsksOnlyForCopies() {
    const at::Tensor mask = ones({4, 4}, at::kBool)
                                .index({at::indexing::None, at::indexing::None})
                                .expand({2, 3, 4, 4});
    struct Case {
      at::Tensor x;
      Shape shape;
    };
    const std::vector<Case> cases = {{mask, {6, 4, 4}},
                                     {mask, {2, 3, 16}},
                                     {mask, {-1}},
                                     {ones({3, 4}).t(), {12}},
                                     {ones({3, 4}), {2, 6}},
                                     {ones({1}).expand({5, 5}), {25}},
                                     {ones({2, 3, 4}).transpose(0, 1), {3, 8}}};
    for (const Case& c : cases) {
      const at::Tensor made = c.x.reshape(c.shape);
      const int64_t predicted = reshapedBytes(c.x, c.shape);
      QVERIFY2((predicted == 0) == made.is_alias_of(c.x), shown(c.shape).c_str());
      if (predicted) QCOMPARE(predicted, int64_t(made.nbytes()));
    }
    for (const auto& [start, end] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 1}, {1, 2}, {0, -1}, {2, 3}, {-2, -1}, {1, 1}}) {
      const at::Tensor made = mask.flatten(start, end);
      const int64_t predicted = flattenedBytes(mask, start, end);
      const std::string what = std::to_string(start) + " " + std::to_string(end);
      QVERIFY2((predicted == 0) == made.is_alias_of(mask), what.c_str());
      if (predicted) QCOMPARE(predicted, int64_t(made.nbytes()));
    }
    QCOMPARE(flattenedBytes(mask, 0, 7), int64_t(0));  // torch's own error
  }

  // Index tensors gather a new tensor, whose shape torch's advanced indexing gives (the indices'
  // broadcast shape where they stand together, first when a slice parts them); slices alone are
  // a view; a mask selects its true count.
  void gatherAsksForTheIndexShape() {
    using namespace at::indexing;
    const at::Tensor x = ones({5, 3, 2});
    const auto longs = at::TensorOptions().dtype(at::kLong);
    const at::Tensor ids = at::zeros({4, 7}, longs), i = at::zeros({6}, longs),
                     j = at::ones({6}, longs), column = at::zeros({6, 1}, longs);
    const auto asATenMakes = [&](c10::ArrayRef<TensorIndex> index) {
      QCOMPARE(indexedBytes(x, index), int64_t(x.index(index).nbytes()));
    };
    asATenMakes({ids});
    asATenMakes({i, j});
    asATenMakes({Slice(), i});
    asATenMakes({i, Slice(), j});
    asATenMakes({i, j, Slice(None, 1)});
    asATenMakes({Ellipsis, i});
    asATenMakes({None, i, column});
    asATenMakes({column, j});
    asATenMakes({at::tensor(int64_t(2)), i});
    QCOMPARE(indexedBytes(x, {Slice(), 1}), int64_t(0));  // a view
    // Masks select their true count (x's dims they cover become one), beside slices and ids.
    const at::Tensor some = at::tensor({1, 0, 1, 1, 0}) > 0, grid = at::rand({3, 2}) > 0.5;
    asATenMakes({some});
    asATenMakes({Slice(), grid});
    asATenMakes({some, Slice(), at::zeros({1}, longs)});
    asATenMakes({Ellipsis, at::tensor({0, 1}) > 0});
    asATenMakes({at::zeros({5}, at::kBool)});
    asATenMakes({some.to(at::kByte)});
    asATenMakes({ones({}, at::kBool)});  // x[True] gathers x under a new dim, a copy
    asATenMakes({true});
    asATenMakes({false, Slice()});
    asATenMakes({ones({}, at::kBool), i});
    asATenMakes({Slice(), at::zeros({}, at::kByte)});
    // An expanded mask is counted without a copy of its repeats, and selects as a whole one.
    const at::Tensor wide =
        (at::tensor({1, 0, 1}) > 0).expand({5, 3}).unsqueeze(2).expand({5, 3, 2});
    asATenMakes({wide});
    asATenMakes({wide.select(2, 0)});
    QCOMPARE(indexedBytes(x, {i, j, i, j}), int64_t(0));  // too many indices: torch's error
  }

  // A reduction over some dims keeps the others' elements, with keepdim or not, whatever order or
  // sign the dims come in; no dims is every dim (amax(())); a dim out of range is torch's error.
  void reductionsAskForTheDimsTheyKeep() {
    const at::Tensor x = ones({4, 3, 5}), scalar = ones({});
    for (const std::vector<int64_t>& dims :
         std::vector<std::vector<int64_t>>{{0}, {1}, {-1}, {0, 2}, {2, -3}, {0, 1, 2}, {}}) {
      for (const bool keep : {false, true}) {
        const at::Tensor made = x.amax(dims, keep);
        QCOMPARE(reducedBytes(x, dims, at::kFloat), int64_t(made.nbytes()));
        QCOMPARE(reducedBytes(x, dims, at::kLong), int64_t(x.sum(dims, keep, at::kLong).nbytes()));
      }
    }
    QCOMPARE(reducedBytes(scalar, {0}, at::kFloat), int64_t(scalar.sum(0).nbytes()));
    QCOMPARE(reducedBytes(scalar, {-1}, at::kFloat), int64_t(scalar.sum(-1).nbytes()));
    QCOMPARE(reducedBytes(x, {3}, at::kFloat), int64_t(0));
    QCOMPARE(reducedBytes(x, {-4}, at::kFloat), int64_t(0));
    QCOMPARE(reducedBytes(x, {2, -1}, at::kFloat), int64_t(0));     // a dim twice: torch's error
    const at::Tensor expanded = ones({1}).expand({1000, 1000, 2});  // 8 bytes held
    QCOMPARE(reducedBytes(expanded, {2}, at::kFloat), int64_t(4) * 1000 * 1000);
  }

  // Only a view with more elements than its storage holds would grow when copied.
  void expandedViewsAreTheOnlyCopiesThatGrow() {
    const at::Tensor base = ones({1});
    const at::Tensor expanded = base.expand({3, 4});
    QCOMPARE(expandedCopyBytes(expanded), int64_t(expanded.clone().nbytes()));
    QCOMPARE(expandedCopyBytes(ones({3, 4})), int64_t(0));
    QCOMPARE(expandedCopyBytes(ones({3, 4}).narrow(0, 1, 2)), int64_t(0));
    QCOMPARE(expandedCopyBytes(ones({3, 4}).t()), int64_t(0));
  }

  // Sizes past any memory saturate instead of overflowing (2**60 bytes).
  void hugeSizesSaturate() {
    const int64_t huge = int64_t(1) << 60;
    QCOMPARE(tensorBytes({int64_t(1) << 40, int64_t(1) << 40}, at::kFloat), huge);
    QCOMPARE(tensorBytes({3, 0, int64_t(1) << 62}, at::kFloat), int64_t(0));
    QCOMPARE(tensorBytes({}, at::kDouble), int64_t(8));
    const at::Tensor wide = ones({1}).expand({int64_t(1) << 31, int64_t(1) << 31});
    QCOMPARE(broadcastBytes(wide, wide, at::kFloat), huge);
  }
};

QTEST_APPLESS_MAIN(TestResultSizes)
#include "tst_result_sizes.moc"
