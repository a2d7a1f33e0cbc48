using System;
using System.IO;
using CoreAI.Runtime;
using Newtonsoft.Json;

namespace CoreAI.Launcher
{
    /// <summary>
    /// What a launcher records about the runtime it started, so that the next launcher (after an
    /// editor domain reload) can find and reuse it. Lives under `CoreAI/runtime/` of the data dir.
    /// </summary>
    [Preserve]  // Newtonsoft reads and writes it by reflection (IL2CPP stripping)
    internal sealed class RuntimeState
    {
        [Preserve, JsonProperty("pid")] public int ProcessId;
        [Preserve, JsonProperty("host")] public string Host;
        [Preserve, JsonProperty("connectPort")] public int ConnectPort;
        [Preserve, JsonProperty("grpcPort")] public int GrpcPort;
        [Preserve, JsonProperty("modelPort")] public int ModelPort;
        [Preserve, JsonProperty("token")] public string Token;
        [Preserve, JsonProperty("projectId")] public string ProjectId;
        [Preserve, JsonProperty("fingerprint")] public string Fingerprint;
        [Preserve, JsonProperty("startedAtUtc")] public DateTime StartedAtUtc;
        // True from the spawn until the runtime first answered health: a launcher that finds it waits for it.
        [Preserve, JsonProperty("starting")] public bool Starting;
        // The process that spawned it: when that is this process (a launcher before a domain reload), the runtime is
        // our child, and the next launcher reaps it once it ends instead of leaving a zombie.
        [Preserve, JsonProperty("spawnedBy")] public int SpawnedBy;
        // The executable it runs: "Fetch Runtime" never swaps the folder of a runtime that still runs from it.
        [Preserve, JsonProperty("runtimePath")] public string RuntimePath;

        /// <summary>The recorded runtime's Connect URL.</summary>
        [JsonIgnore]
        public string BaseUrl
        {
            get { return "http://" + Host + ":" + ConnectPort; }
        }
    }

    /// <summary>Reads and writes the launcher's state file (atomically; an unreadable file counts as none).</summary>
    internal static class RuntimeStateFile
    {
        /// <summary>
        /// True while the recorded runtime runs. One this process spawned (before a domain reload, say) is reaped on the
        /// way once it ended, so it never lingers as a zombie; no other process's child is ever reaped.
        /// </summary>
        public static bool IsAlive(RuntimeState state)
        {
            ProcessSpawner spawner = ProcessSpawner.Current;
            if (state.SpawnedBy != 0 && state.SpawnedBy == spawner.CurrentProcessId) spawner.Reap(state.ProcessId);
            return spawner.IsAlive(state.ProcessId);
        }

        /// <summary>The state, or null when there is no readable state file.</summary>
        public static RuntimeState Read(string path)
        {
            try
            {
                if (!File.Exists(path)) return null;
                RuntimeState state = JsonConvert.DeserializeObject<RuntimeState>(File.ReadAllText(path));
                if (state == null || state.ProcessId <= 0 || string.IsNullOrEmpty(state.Token)) return null;
                return state;
            }
            catch (IOException)
            {
                return null;
            }
            catch (UnauthorizedAccessException)
            {
                return null;
            }
            catch (JsonException)
            {
                return null;
            }
        }

        /// <summary>Writes `state` to `path` through a temp file, so a reader never sees half a file; only the user may read it (it holds the token).</summary>
        public static void Write(string path, RuntimeState state)
        {
            string temp = path + ".tmp";
            // The file is made private while still empty, so the token is never readable by others, not even briefly.
            File.WriteAllText(temp, "");
            OwnerOnly.Restrict(temp);
            File.WriteAllText(temp, JsonConvert.SerializeObject(state, Formatting.Indented));
            if (File.Exists(path)) File.Delete(path);  // a move keeps the temp file's permissions; Replace would keep the old file's
            File.Move(temp, path);
        }

        /// <summary>Deletes the state file if it still records `pid` (0: whatever it records).</summary>
        public static void Delete(string path, int pid)
        {
            try
            {
                if (pid != 0)
                {
                    RuntimeState state = Read(path);
                    if (state != null && state.ProcessId != pid) return;
                }
                if (File.Exists(path)) File.Delete(path);
            }
            catch (IOException)
            {
            }
            catch (UnauthorizedAccessException)
            {
            }
        }
    }
}
