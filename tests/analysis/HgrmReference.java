// Reference side of tests/analysis/test_formats.py: Java HdrHistogram (Debian libhdrhistogram-java)
// prints the .hgrm percentile distribution of histograms hilat encoded.
//
//   java -cp hdrhistogram.jar HgrmReference.java < SPECS
//
// SPECS has one histogram a line: "TICKS_PER_HALF_DISTANCE UNIT_RATIO BASE64" (BASE64: the V2 compressed
// encoding, HdrHistogram.encode_base64()). For each, the output of
// outputPercentileDistribution(System.out, TICKS_PER_HALF_DISTANCE, UNIT_RATIO), then a line "#END".
import java.io.*;
import java.nio.ByteBuffer;
import java.util.Base64;
import org.HdrHistogram.*;

public class HgrmReference {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "US-ASCII"));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "US-ASCII");
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 3) {
                continue;
            }
            ByteBuffer buffer = ByteBuffer.wrap(Base64.getDecoder().decode(f[2]));
            Histogram h = Histogram.decodeFromCompressedByteBuffer(buffer, 0);
            h.outputPercentileDistribution(out, Integer.parseInt(f[0]), Double.parseDouble(f[1]));
            out.print("#END\n");
        }
        out.flush();
    }
}
