package io.github.verbs4j.examples;

import io.github.verbs4j.Verbs;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static io.github.verbs4j.examples.ToolRun.inProcess;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** devinfo and gids against rdma-core's ibv_devinfo on the same library. */
class DevInfoTest {

    private static String stock(String... args) {
        List<String> command = new ArrayList<>(List.of("ibv_devinfo"));
        command.addAll(List.of(args));
        try (Proc p = Proc.stock(command.toArray(String[]::new))) {
            return p.await(30).assertSuccess().out();
        }
    }

    @BeforeAll
    static void rdma() {
        assumeTrue(Verbs.isAvailable(), "no RDMA library with a device");
    }

    /** ibv_devinfo's board_id comes from a sysfs file only a kernel device has; verbs4j prints it when that file exists. */
    private static String withoutBoardIdUnlessSysfs(String stock, String ours) {
        return ours.contains("\tboard_id:") ? stock : stock.replaceAll("(?m)^\tboard_id:.*\n", "");
    }

    @Test
    void devinfoPrintsWhatIbvDevinfoPrints() {
        ToolRun ours = inProcess("devinfo");
        assertEquals(0, ours.exitCode(), ours.err());
        assertEquals(withoutBoardIdUnlessSysfs(stock(), ours.out()), ours.out());

        ToolRun onePort = inProcess("devinfo", "-i", "1");
        assertEquals(withoutBoardIdUnlessSysfs(stock("-i", "1"), onePort.out()), onePort.out());

        ToolRun listed = inProcess("devinfo", "-l");
        assertEquals(stock("-l"), listed.out());
    }

    @Test
    void verboseLinesAreIbvDevinfosLinesInItsOrder() {
        // verbs4j prints a subset of ibv_devinfo -v (what the public API exposes); every line it
        // prints must be one of the stock lines, identical, in the same order
        ToolRun ours = inProcess("devinfo", "-v");
        assertEquals(0, ours.exitCode(), ours.err());
        List<String> stockLines = stock("-v").lines().toList();
        int at = 0;
        int gids = 0;
        for (String line : ours.out().lines().toList()) {
            int found = -1;
            for (int i = at; i < stockLines.size(); i++) {
                if (stockLines.get(i).equals(line)) {
                    found = i;
                    break;
                }
            }
            if (found < 0) {
                fail("'" + line + "' is not in ibv_devinfo -v after line " + at + ":\n" + String.join("\n", stockLines)
                        + "\n--- ours:\n" + ours.out());
            }
            at = found + 1;
            if (line.contains("GID[")) {
                gids++;
            }
        }
        assertTrue(ours.out().contains("\tdevice_cap_flags:\t\t0x"), ours.out());
        assertTrue(gids > 0, "the GID table is missing:\n" + ours.out());
        assertTrue(ours.out().lines().count() >= 40, ours.out());
    }

    private static final Pattern STOCK_GID = Pattern.compile("^\t\t\tGID\\[ *(\\d+)\\]:\t\t(\\S+), RoCE (v[12])$", Pattern.MULTILINE);

    @Test
    void gidsAgreeWithIbvDevinfosGidTable() throws Exception {
        ToolRun ours = inProcess("gids");
        assertEquals(0, ours.exitCode(), ours.err());
        List<String> lines = ours.out().lines().toList();
        assertEquals("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV", lines.get(0));
        assertEquals("---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---", lines.get(1));

        String stock = stock("-v");
        String device = stock.lines().findFirst().orElseThrow().substring("hca_id:\t".length());
        Map<Integer, String[]> stockGids = new HashMap<>();
        Matcher m = STOCK_GID.matcher(stock.substring(0, stock.indexOf("hca_id:", 1) > 0 ? stock.indexOf("hca_id:", 1) : stock.length()));
        while (m.find()) {
            stockGids.put(Integer.parseInt(m.group(1)), new String[] {m.group(2), m.group(3)});
        }
        assumeTrue(!stockGids.isEmpty(), "the first device's port 1 is not RoCE: nothing to compare");

        int rows = 0;
        for (String line : lines.subList(2, lines.size() - 1)) {
            String[] f = line.split("\t", -1);
            if (!f[0].equals(device) || !f[1].equals("1")) {
                continue;
            }
            int index = Integer.parseInt(f[2]);
            String[] expected = stockGids.get(index);
            if (expected == null) {
                fail("gids lists index " + index + " which ibv_devinfo -v does not: " + line);
            }
            byte[] raw = HexFormat.of().parseHex(f[3].replace(":", ""));
            assertEquals(InetAddress.getByName(expected[0]), InetAddress.getByAddress(raw), line);
            assertEquals(expected[1], f[f.length - 2], line);
            if (raw[10] == (byte) 0xff && raw[11] == (byte) 0xff && raw[0] == 0) {
                assertEquals(InetAddress.getByAddress(java.util.Arrays.copyOfRange(raw, 12, 16)).getHostAddress() + " ", f[4], line);
            }
            rows++;
        }
        assertEquals(stockGids.size(), rows, ours.out());
        assertEquals("n_gids_found=" + (lines.size() - 3), lines.getLast());
    }

    @Test
    void badDeviceAndPortAreOneLineErrors() {
        ToolRun noDevice = inProcess("devinfo", "-d", "nosuchdev0");
        assertEquals(1, noDevice.exitCode(), noDevice.err());
        assertTrue(noDevice.err().startsWith("verbs4j: RDMA device nosuchdev0 not found (have: "), noDevice.err());

        ToolRun noPort = inProcess("devinfo", "-i", "9");
        assertEquals(1, noPort.exitCode(), noPort.err());
        assertTrue(noPort.err().matches("verbs4j: \\S+ has no port 9 \\(it has \\d+\\)\n"), noPort.err());

        ToolRun zeroPort = inProcess("devinfo", "-i", "0");
        assertEquals(2, zeroPort.exitCode(), zeroPort.err());
    }
}
