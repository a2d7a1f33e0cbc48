using System.Threading;
using CoreAI.Runtime;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// The game's play session as the package's clients see it: Unity's main thread (its SynchronizationContext,
    /// captured on the main thread) and a lifetime that ends when Play Mode ends or the application quits. Clients made
    /// by <see cref="CoreAIRuntimeBootstrap.CreateClient"/> carry it (<see cref="GameHost"/>), so a stopped game's turns,
    /// stream callbacks and game tools never run on in Edit Mode, and main-thread tools run on the main thread even
    /// when the turn was started after a ConfigureAwait(false).
    /// </summary>
    public static class CoreAIPlaySession
    {
        private static readonly object Gate = new object();
        private static CancellationTokenSource session;
        private static SynchronizationContext mainThread;
        private static bool listening;

        /// <summary>Cancelled when the current session ends (Play Mode ends, the application quits); None before the first.</summary>
        public static CancellationToken Lifetime
        {
            get
            {
                lock (Gate) return session == null ? CancellationToken.None : session.Token;
            }
        }

        /// <summary>True between Begin and the session's end.</summary>
        public static bool IsActive
        {
            get
            {
                lock (Gate) return session != null && !session.IsCancellationRequested;
            }
        }

        /// <summary>Unity's main-thread context as captured by the last Begin (null before).</summary>
        public static SynchronizationContext MainThread
        {
            get
            {
                lock (Gate) return mainThread;
            }
        }

        /// <summary>
        /// Begins a session (call on the main thread; a no-op while one runs): captures Unity's main-thread context and
        /// starts a new lifetime. Runs before the first scene loads, and from the bootstrap's Awake.
        /// </summary>
        public static void Begin()
        {
            SynchronizationContext current = SynchronizationContext.Current;
            lock (Gate)
            {
                if (current != null) mainThread = current;
                if (session == null || session.IsCancellationRequested) session = new CancellationTokenSource();
                if (listening) return;
                listening = true;
            }
            // In the editor also raised when Play Mode ends (the editor's own hook ends the session earlier still).
            Application.quitting += End;
        }

        /// <summary>Ends the session: every call of a client made for it ends (OperationCanceledException), no game tool runs.</summary>
        public static void End()
        {
            CancellationTokenSource ending;
            lock (Gate) ending = session;
            if (ending == null) return;
            try
            {
                ending.Cancel();
            }
            catch (System.AggregateException e)
            {
                CoreAILog.Exception("ending the play session", e.GetBaseException());
            }
        }

        /// <summary>
        /// The GameHost of a client made now: the main thread, this session's lifetime, and Application.isPlaying as the
        /// check before a main-thread game tool runs (read there, on the main thread, as Unity requires).
        /// </summary>
        public static GameHost Host()
        {
            return new GameHost { MainThread = MainThread, Lifetime = Lifetime, CanRunGameCode = () => Application.isPlaying };
        }

        [RuntimeInitializeOnLoadMethod(RuntimeInitializeLoadType.SubsystemRegistration)]
        private static void BeginBeforeTheFirstScene()
        {
            // First of all in a player and at every Play (also with domain reload off, when statics survive the last one).
            Begin();
        }
    }
}
