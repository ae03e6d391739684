// Reference side of tests/analysis/test_hdr.py: HdrHistogram's own Java implementation (Debian
// libhdrhistogram-java) reads and writes interval logs and reports what it sees, one fact a line.
//
//   java -cp hdrhistogram.jar HdrReference.java read LOG PERCENTILE...
//   java -cp hdrhistogram.jar HdrReference.java write VALUES LOG RATIO
//
// read: for each interval "interval TAG START_MS END_MS TOTAL MIN MAX MEAN STDDEV", then
//       "bucket VALUE COUNT" per recorded bucket, "pct P VALUE" per percentile,
//       "dist VALUE LEVEL TOTAL" per percentile-distribution row (5 ticks per half distance).
// write: VALUES has one interval a line: "START_S END_S TAG|- v1 v2 ..."; each becomes a
//        Histogram(1, 2^40, 3) logged with the writer's header lines (base time = start time).
import java.io.*;
import java.nio.file.*;
import java.util.*;
import org.HdrHistogram.*;

public class HdrReference {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("read")) {
            read(args[1], Arrays.copyOfRange(args, 2, args.length));
        } else {
            write(args[1], args[2], Double.parseDouble(args[3]));
        }
    }

    static void read(String path, String[] percentiles) throws Exception {
        HistogramLogReader reader = new HistogramLogReader(path);
        PrintStream out = System.out;
        EncodableHistogram e;
        while ((e = reader.nextIntervalHistogram()) != null) {
            Histogram h = (Histogram) e;
            out.printf(Locale.US, "interval %s %d %d %d %d %d %.17g %.17g%n", h.getTag() == null ? "-" : h.getTag(),
                    h.getStartTimeStamp(), h.getEndTimeStamp(), h.getTotalCount(), h.getMinValue(),
                    h.getMaxValue(), h.getMean(), h.getStdDeviation());
            for (HistogramIterationValue v : h.recordedValues()) {
                out.printf("bucket %d %d%n", v.getValueIteratedTo(), v.getCountAtValueIteratedTo());
            }
            for (String p : percentiles) {
                out.printf("pct %s %d%n", p, h.getValueAtPercentile(Double.parseDouble(p)));
            }
            for (HistogramIterationValue v : h.percentiles(5)) {
                out.printf(Locale.US, "dist %d %.17g %d%n", v.getValueIteratedTo(), v.getPercentileLevelIteratedTo(),
                        v.getTotalCountToThisValue());
            }
        }
    }

    static void write(String valuesPath, String logPath, double ratio) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(valuesPath));
        HistogramLogWriter writer = new HistogramLogWriter(logPath);
        writer.outputComment("written by HdrHistogram Java for hilat tests");
        writer.outputLogFormatVersion();
        long startMs = 1700000000123L;
        writer.outputStartTime(startMs);
        writer.outputBaseTime(startMs);
        writer.outputLegend();
        for (String line : lines) {
            String[] f = line.trim().split("\\s+");
            Histogram h = new Histogram(1, 1L << 40, 3);
            for (int i = 3; i < f.length; i++) {
                h.recordValue(Long.parseLong(f[i]));
            }
            if (!f[2].equals("-")) {
                h.setTag(f[2]);
            }
            writer.outputIntervalHistogram(Double.parseDouble(f[0]), Double.parseDouble(f[1]), h, ratio);
        }
        writer.close();
    }
}
