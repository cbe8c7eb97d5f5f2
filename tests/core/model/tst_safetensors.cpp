// SafetensorsFile and writeSafetensors: a round trip of every dtype and shape, zero-copy views,
// and the checks made when a file is opened.
#include <QtTest>

#include <fstream>

#include "common/test_support.h"
#include "core/error.h"
#include "core/model/safetensors_file.h"
#include "core/model/weight_source.h"

using namespace shardscope;

namespace {

void writeRaw(const std::filesystem::path& p, const std::string& header, const std::string& data) {
  std::ofstream out(p, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

template <class F>
std::string errorOf(F fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void roundTripEveryDtype_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("f32") << int(at::kFloat);
    QTest::newRow("f16") << int(at::kHalf);
    QTest::newRow("bf16") << int(at::kBFloat16);
    QTest::newRow("f64") << int(at::kDouble);
    QTest::newRow("i64") << int(at::kLong);
    QTest::newRow("i32") << int(at::kInt);
    QTest::newRow("u8") << int(at::kByte);
    QTest::newRow("bool") << int(at::kBool);
  }
  void roundTripEveryDtype() {
    QFETCH(int, dtype);
    const auto t = at::ScalarType(dtype);
    test::TempDir dir;
    const auto path = dir.path() / "x.safetensors";
    std::vector<std::pair<std::string, at::Tensor>> tensors = {
        {"matrix", (at::arange(12, at::kFloat) - 5).view({3, 4}).to(t)},
        {"scalar", at::scalar_tensor(3, at::kFloat).to(t)},
        {"empty", at::empty({0, 5}, at::TensorOptions().dtype(t))},
        {"cube", (at::arange(24, at::kFloat) % 2).view({2, 3, 4}).to(t)},
    };
    writeSafetensors(path, tensors, {{"format", "pt"}});
    SafetensorsFile file(path);
    QCOMPARE(file.entries().size(), size_t(4));
    for (const auto& [name, expected] : tensors) {
      const auto& e = file.entry(name);
      QCOMPARE(e.dtype, t);
      QCOMPARE(e.shape, expected.sizes().vec());
      QVERIFY2(at::equal(file.view(e), expected), name.c_str());
    }
  }

  void sliceLoadsOnlyTheRequestedRows() {
    test::TempDir dir;
    const at::Tensor w = at::arange(40, at::kFloat).view({8, 5});
    writeSafetensors(dir.path() / "model.safetensors", {{"w", w}});
    SafetensorsSource source(dir.path());
    const at::Tensor rows = source.load("w", {8, 5}, SliceSpec::along(0, 2, 3), at::kFloat);
    QVERIFY(at::equal(rows, w.narrow(0, 2, 3)));
    const at::Tensor cols = source.load("w", {8, 5}, SliceSpec::along(1, 1, 2), at::kBFloat16);
    QVERIFY(at::equal(cols, w.narrow(1, 1, 2).to(at::kBFloat16)));
  }

  void randomSourceSlicesEqualSlicesOfTheWhole() {
    RandomSource source(7);
    const at::Tensor whole = source.load("model.layers.0.self_attn.o_proj.weight", {64, 96},
                                         SliceSpec::whole(), at::kFloat);
    for (int r = 0; r < 4; ++r) {
      const at::Tensor cols = source.load("model.layers.0.self_attn.o_proj.weight", {64, 96},
                                          SliceSpec::along(1, r * 24, 24), at::kFloat);
      QVERIFY(at::equal(cols, whole.narrow(1, r * 24, 24)));
      const at::Tensor rows = source.load("model.layers.0.self_attn.o_proj.weight", {64, 96},
                                          SliceSpec::along(0, r * 16, 16), at::kFloat);
      QVERIFY(at::equal(rows, whole.narrow(0, r * 16, 16)));
    }
    const at::Tensor other = source.load("model.layers.1.self_attn.o_proj.weight", {64, 96},
                                         SliceSpec::whole(), at::kFloat);
    QVERIFY(!at::equal(other, whole));
  }

  // The GPU path (tensor ops where the weights will live) makes the host loop's values bit for
  // bit: whole tensors, slices along each dimension, every kind of scale, fp32 and bf16.
  void randomSourceTensorOpsEqualTheHostLoop_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<std::vector<int64_t>>("shape");
    QTest::addColumn<int>("dim");
    QTest::addColumn<int>("start");
    QTest::addColumn<int>("length");
    const std::vector<int64_t> matrix{48, 40};
    QTest::newRow("matrix whole") << "model.layers.3.mlp.down_proj.weight" << matrix << -1 << 0
                                  << 0;
    QTest::newRow("matrix rows") << "model.layers.3.mlp.gate_proj.weight" << matrix << 0 << 12
                                 << 24;
    QTest::newRow("matrix columns")
        << "model.layers.3.mlp.down_proj.weight" << matrix << 1 << 10 << 20;
    QTest::newRow("norm") << "model.norm.weight" << std::vector<int64_t>{40} << -1 << 0 << 0;
    QTest::newRow("bias slice") << "model.layers.0.self_attn.q_proj.bias"
                                << std::vector<int64_t>{40} << 0 << 8 << 16;
    QTest::newRow("embedding") << "model.embed_tokens.weight" << matrix << 0 << 40 << 8;
    QTest::newRow("3-d middle") << "x.weight" << std::vector<int64_t>{3, 10, 7} << 1 << 4 << 5;
  }

  void randomSourceTensorOpsEqualTheHostLoop() {
    QFETCH(QString, name);
    QFETCH(std::vector<int64_t>, shape);
    QFETCH(int, dim);
    QFETCH(int, start);
    QFETCH(int, length);
    const SliceSpec slice = dim < 0 ? SliceSpec::whole() : SliceSpec::along(dim, start, length);
    RandomSource source(11);
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor host = source.load(name.toStdString(), shape, slice, dtype);
      // On the test device (SHARDSCOPE_TEST_DEVICE=cuda: CUDA's integer kernels).
      const at::Tensor ops = source
                                 .makeWithTensorOps(name.toStdString(), shape, slice, dtype,
                                                    at::Device(test::device()))
                                 .cpu();
      QCOMPARE(ops.sizes().vec(), host.sizes().vec());
      QCOMPARE(ops.scalar_type(), dtype);
      QVERIFY2(at::equal(ops, host),
               qPrintable(
                   QString("largest difference %1")
                       .arg((ops.to(at::kFloat) - host.to(at::kFloat)).abs().max().item<float>())));
    }
  }

  void refusesBadFiles_data() {
    QTest::addColumn<QString>("header");
    QTest::addColumn<int>("dataBytes");
    QTest::addColumn<QString>("message");
    QTest::newRow("offsets past the end")
        << R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})" << 4 << "lie outside";
    QTest::newRow("unknown dtype") << R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})"
                                   << 8 << "dtype 'Q4' is not supported";
    QTest::newRow("size disagrees with shape")
        << R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})" << 8 << "need 12";
    QTest::newRow("not json") << "{not json" << 0 << "not valid JSON";
    QTest::newRow("entry without offsets")
        << R"({"w":{"dtype":"F32","shape":[2]}})" << 8 << "data_offsets";
    // A byte count that wrapped around passed as 0 bytes (fuzz/regressions/safetensors).
    QTest::newRow("shape bytes wrap around")
        << R"({"w":{"dtype":"F32","shape":[2305843009213693952,2],"data_offsets":[0,0]}})" << 0
        << "bad shape";
    // No elements, but strides past int64: LibTorch 2.x refused the empty tensor with its own
    // error type (found by tst_fuzz_replay_safetensors on the GPU machine).
    QTest::newRow("empty tensor whose strides overflow")
        << R"({"w":{"dtype":"F32","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})"
        << 0 << "does not fit in 64 bits";
    QTest::newRow("dtype not a string")
        << R"({"w":{"dtype":5,"shape":[2],"data_offsets":[0,8]}})" << 8 << "dtype must be a string";
    QTest::newRow("shape not a list")
        << R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})" << 8 << "shape must be a list";
  }
  void refusesBadFiles() {
    QFETCH(QString, header);
    QFETCH(int, dataBytes);
    QFETCH(QString, message);
    test::TempDir dir;
    const auto path = dir.path() / "bad.safetensors";
    writeRaw(path, header.toStdString(), std::string(size_t(dataBytes), '\0'));
    const std::string error = errorOf([&] { SafetensorsFile f(path); });
    QVERIFY2(error.find(message.toStdString()) != std::string::npos, error.c_str());
    QVERIFY2(error.find(path.string()) != std::string::npos, error.c_str());
  }

  void refusesTruncatedHeader() {
    test::TempDir dir;
    const auto path = dir.path() / "short.safetensors";
    writeRaw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "");
    std::filesystem::resize_file(path, 20);
    const std::string error = errorOf([&] { SafetensorsFile f(path); });
    QVERIFY2(error.find("truncated") != std::string::npos, error.c_str());
  }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
