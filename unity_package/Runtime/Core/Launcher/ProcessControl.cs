using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Threading;

namespace CoreAI.Launcher
{
    /// <summary>Spawning, probing and stopping the runtime process.</summary>
    internal static class ProcessControl
    {
        private const int SigTerm = 15;

        [DllImport("libc", EntryPoint = "kill", SetLastError = true)]
        private static extern int SysKill(int pid, int sig);

        /// <summary>
        /// Starts `exe args` with its output appended to `logPath`. On Unix a shell `exec`s the runtime
        /// with its output redirected to the file, so the runtime never writes into a pipe that a
        /// reloaded script domain stopped reading, and the pid is the runtime's own.
        /// </summary>
        public static Process Spawn(string exe, IList<string> args, IDictionary<string, string> env, string workDir, string logPath)
        {
            ProcessStartInfo info;
            if (Platform.IsWindows)
            {
                info = new ProcessStartInfo(exe, CommandLine.Join(args));
                info.RedirectStandardOutput = true;
                info.RedirectStandardError = true;
            }
            else
            {
                List<string> shellArgs = new List<string>();
                shellArgs.Add("-c");
                shellArgs.Add("exec \"$@\" >>\"$COREAI_RUNTIME_LOG\" 2>&1");
                shellArgs.Add("coreai-runtime");
                shellArgs.Add(exe);
                shellArgs.AddRange(args);
                info = new ProcessStartInfo("/bin/sh", CommandLine.Join(shellArgs));
                info.EnvironmentVariables["COREAI_RUNTIME_LOG"] = logPath;
            }
            info.UseShellExecute = false;
            info.CreateNoWindow = true;
            info.RedirectStandardInput = false;
            info.WorkingDirectory = workDir;
            foreach (KeyValuePair<string, string> pair in env) info.EnvironmentVariables[pair.Key] = pair.Value;
            Process process = Process.Start(info);
            ProcessLifeline.TieToThisProcess(process); // Windows: dies with the game even if the game is killed
            if (Platform.IsWindows) PumpToFile(process, logPath);
            return process;
        }

        private static void PumpToFile(Process process, string logPath)
        {
            StreamWriter writer = new StreamWriter(new FileStream(logPath, FileMode.Append, FileAccess.Write, FileShare.ReadWrite | FileShare.Delete));
            writer.AutoFlush = true;
            DataReceivedEventHandler write = (sender, e) =>
            {
                if (e.Data == null) return;
                lock (writer)
                {
                    try { writer.WriteLine(e.Data); } catch (IOException) { } catch (ObjectDisposedException) { }
                }
            };
            process.OutputDataReceived += write;
            process.ErrorDataReceived += write;
            process.BeginOutputReadLine();
            process.BeginErrorReadLine();
        }

        /// <summary>True while a process with this id runs (a zombie counts as gone).</summary>
        public static bool IsAlive(int pid)
        {
            if (pid <= 0) return false;
            try
            {
                using (Process process = Process.GetProcessById(pid))
                {
                    if (process.HasExited) return false;
                }
            }
            catch (ArgumentException)
            {
                return false;
            }
            catch (InvalidOperationException)
            {
                return false;
            }
            return !IsZombie(pid);
        }

        private static bool IsZombie(int pid)
        {
            string stat = "/proc/" + pid + "/stat";
            try
            {
                if (!File.Exists(stat)) return false;
                string text = File.ReadAllText(stat);
                int close = text.LastIndexOf(')');
                return close > 0 && close + 2 < text.Length && text[close + 2] == 'Z';
            }
            catch (IOException)
            {
                return false;
            }
            catch (UnauthorizedAccessException)
            {
                return false;
            }
        }

        /// <summary>Asks the process to stop (SIGTERM; on Windows there is only kill), then kills it after `timeout`.</summary>
        public static void Stop(int pid, Process owned, TimeSpan timeout)
        {
            if (!IsAlive(pid)) return;
            if (!Platform.IsWindows) Terminate(pid);
            else Kill(pid, owned);
            DateTime deadline = DateTime.UtcNow + timeout;
            while (DateTime.UtcNow < deadline)
            {
                if (!IsAlive(pid)) return;
                Thread.Sleep(50);
            }
            Kill(pid, owned);
            DateTime killDeadline = DateTime.UtcNow + TimeSpan.FromSeconds(5);
            while (IsAlive(pid) && DateTime.UtcNow < killDeadline) Thread.Sleep(50);
        }

        private static void Terminate(int pid)
        {
            try
            {
                SysKill(pid, SigTerm);
                return;
            }
            catch (DllNotFoundException)
            {
            }
            catch (EntryPointNotFoundException)
            {
            }
            try
            {
                using (Process kill = Process.Start(new ProcessStartInfo("kill", "-TERM " + pid) { UseShellExecute = false, CreateNoWindow = true }))
                {
                    kill.WaitForExit(5000);
                }
            }
            catch (System.ComponentModel.Win32Exception)
            {
            }
        }

        private static void Kill(int pid, Process owned)
        {
            try
            {
                if (owned != null)
                {
                    owned.Kill();
                    return;
                }
                using (Process process = Process.GetProcessById(pid)) process.Kill();
            }
            catch (ArgumentException)
            {
            }
            catch (InvalidOperationException)
            {
            }
            catch (System.ComponentModel.Win32Exception)
            {
            }
        }

        /// <summary>True when nothing listens on host:port (checked by binding it).</summary>
        public static bool PortIsFree(string host, int port)
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
    }
}
