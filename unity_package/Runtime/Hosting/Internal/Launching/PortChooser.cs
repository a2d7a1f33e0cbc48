using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Sockets;
using CoreAI.Runtime;

namespace CoreAI.Launcher
{
    /// <summary>The ports a runtime starts on: the configured ones, or this project's own when another program has those.</summary>
    internal static class PortChooser
    {
        private const int Slots = 4000;

        /// <summary>
        /// `options` when all its ports are free; else, with ChoosePortsWhenTaken, a copy on this project's first free
        /// triple (`chosen` says which port was taken); else RuntimeLaunchException PortInUse.
        /// </summary>
        public static RuntimeLaunchOptions Choose(RuntimeLaunchOptions options, Action<string> chosen)
        {
            int taken = FirstTakenPort(options);
            if (taken == 0) return options;
            if (!options.ChoosePortsWhenTaken)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.PortInUse,
                    "port " + taken + " on " + options.Host + " is in use by another program; stop it or choose other ports in the CoreAI settings");
            foreach (int[] candidate in Candidates(options.ProjectId + "\n" + options.Instance))
            {
                RuntimeLaunchOptions moved = options.WithPorts(candidate[0], candidate[1], candidate[2]);
                if (FirstTakenPort(moved) != 0) continue;
                if (chosen != null)
                    chosen("port " + taken + " was taken; the runtime uses Connect " + moved.ConnectPort + ", gRPC " + moved.GrpcPort
                        + (string.IsNullOrEmpty(options.LlmUrl) ? ", model " + moved.ModelPort : "") + " (this project's own ports)");
                return moved;
            }
            throw new RuntimeLaunchException(RuntimeLaunchFailure.PortInUse,
                "port " + taken + " on " + options.Host + " is in use, and so are this project's other ports; stop what uses them or choose ports in the CoreAI settings");
        }

        /// <summary>Port triples (Connect, gRPC, model) for a project, the same sequence every time: 20000-31999, below
        /// the OS's ephemeral ranges (Linux from 32768, Windows and macOS from 49152).</summary>
        public static IEnumerable<int[]> Candidates(string projectKey)
        {
            string hex = Digest.Sha256Hex(projectKey ?? "");
            uint seed = Convert.ToUInt32(hex.Substring(0, 8), 16);
            for (int attempt = 0; attempt < 32; attempt++)
            {
                int slot = (int)((seed + (uint)attempt * 2654435761u) % Slots);
                int first = 20000 + slot * 3;
                yield return new[] { first, first + 1, first + 2 };
            }
        }

        /// <summary>True when nothing listens on host:port (checked by binding it).</summary>
        public static bool IsFree(string host, int port)
        {
            IPAddress address;
            if (!IPAddress.TryParse(host, out address)) address = IPAddress.Loopback;
            TcpListener listener = new TcpListener(address, port);
            try
            {
                // As the runtime binds (SO_REUSEADDR): a port in TIME_WAIT is free. Windows's
                // ReuseAddress means something else (sharing a bound port), so not there.
                if (!Platform.IsWindows)
                    listener.Server.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
                listener.Start();
                return true;
            }
            catch (SocketException)
            {
                return false;
            }
            finally
            {
                try { listener.Stop(); } catch (SocketException) { }
            }
        }

        private static int FirstTakenPort(RuntimeLaunchOptions candidate)
        {
            foreach (int port in candidate.Ports())
            {
                if (!IsFree(candidate.Host, port)) return port;
            }
            return 0;
        }
    }
}
